import type { Address } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { newClaimId } from "./claimIds.ts";
import { type ClaimDetails, type ClaimDetailsRow, claimDetailsFromRow } from "./readClaim.ts";
import { uniqueAmountCandidates } from "./reserveAmount.ts";

export type ClaimFlow = "claim" | "x402" | "mail";

export interface NewClaim {
  flow: ClaimFlow;
  payoutAddress: Address;
  email?: string | undefined;
  agentName?: string | undefined;
  /**
   * A digest of who asked (`clientKey`): with OPEN_CLAIMS_PER_CLIENT set, such a client holds at
   * most that many open unpaid claims (`too_many_open_claims`).
   */
  clientKey?: string | undefined;
  /**
   * Give back the open claim-flow claim this request asks for again (same payout address, email
   * and agent name, no tx hash) if at least this many seconds of its life are left, instead of
   * opening a new one. Unset: always a new claim.
   */
  reuseMinLifeSeconds?: number | undefined;
}

export type InsertClaimResult =
  | { type: "created" | "reused"; claim: ClaimDetails }
  | { type: "too_many_open_claims"; limit: number };

/**
 * The birth of every claim, whichever flow, awaiting payment, in the caller's transaction (or
 * as a statement of its own): one call of `app.create_claim` (migration 0012), which takes the
 * payout address's and the client's creation locks, gives back the open claim asked for again,
 * holds the client's cap, inserts the claim and reserves its unique amount. Variant A reserves
 * one (x402 claims are paid by their authorization, never by amount). When no unique amount is
 * free (the space is full, or flooded), the claim still opens, at the plain price and without
 * one: it is then paid like a variant B claim, by its payout address or a named tx hash
 * (`hasUniqueAmount`), and says so. Answers with the claim as `readClaim` reads it.
 */
export async function insertClaim(
  sql: Sql,
  config: Pick<ServiceConfig, "claims">,
  input: NewClaim,
): Promise<InsertClaimResult> {
  const { claims } = config;
  const expiresAt = new Date(Date.now() + claims.lifetimeSeconds * 1000);
  const heldUntil = new Date(expiresAt.getTime() + claims.amountHoldSeconds * 1000);
  const amounts =
    claims.variant === "A" && input.flow !== "x402"
      ? uniqueAmountCandidates(claims.amountSpaceSize)
      : [];
  const clientKey = input.clientKey ?? null;
  const cap = clientKey === null ? 0 : claims.openClaimsPerClient;
  const [row] = await sql<(ClaimDetailsRow & { outcome: InsertClaimResult["type"] })[]>`
    select * from app.create_claim(
      ${newClaimId()}, ${input.flow}, ${input.payoutAddress.toLowerCase()}, ${input.email ?? null},
      ${input.agentName ?? null}, ${clientKey}, ${cap}, ${input.reuseMinLifeSeconds ?? null},
      ${LOCK_KEYS.claimCreation}, ${String(PRICE_ATOMIC)}, ${expiresAt}, ${heldUntil},
      ${amounts}::numeric[])`;
  if (!row) throw new Error("app.create_claim answered nothing");
  if (row.outcome === "too_many_open_claims") return { type: row.outcome, limit: cap };
  return { type: row.outcome, claim: claimDetailsFromRow(row) };
}
