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
 * as a statement of its own): one call of `app.create_claim` (api/db/definitions/claim_creation.sql), which takes the
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
  return insertClaimWith(sql, creationArguments(config, input));
}

/** `insertClaim` with its arguments chosen already (a batch's claim opened alone, same id). */
export async function insertClaimWith(
  sql: Sql,
  claim: CreationArguments,
): Promise<InsertClaimResult> {
  const [row] = await sql<CreatedRow[]>`
    select * from app.create_claim(
      ${claim.id}, ${claim.flow}, ${claim.payout_address}, ${claim.email}, ${claim.agent_name},
      ${claim.client_key}, ${claim.cap}, ${claim.reuse_min_life_seconds},
      ${LOCK_KEYS.claimCreation}, ${String(PRICE_ATOMIC)}, ${claim.expires_at},
      ${claim.held_until}, ${claim.amounts}::numeric[])`;
  if (!row) throw new Error("app.create_claim answered nothing");
  return insertClaimResult(row, claim.cap);
}

/** A row app.create_claim (and app.create_claims) answers. */
export type CreatedRow = ClaimDetailsRow & { outcome: InsertClaimResult["type"] };

/** What app.create_claim takes for one claim, named as app.create_claims reads it. */
export interface CreationArguments {
  id: string;
  flow: ClaimFlow;
  payout_address: string;
  email: string | null;
  agent_name: string | null;
  client_key: string | null;
  cap: number;
  reuse_min_life_seconds: number | null;
  expires_at: Date;
  held_until: Date;
  amounts: string[];
}

/** The claim's id, times and candidate amounts, chosen now; the rest as asked. */
export function creationArguments(
  config: Pick<ServiceConfig, "claims">,
  input: NewClaim,
): CreationArguments {
  const { claims } = config;
  const expiresAt = new Date(Date.now() + claims.lifetimeSeconds * 1000);
  const clientKey = input.clientKey ?? null;
  return {
    id: newClaimId(),
    flow: input.flow,
    payout_address: input.payoutAddress.toLowerCase(),
    email: input.email ?? null,
    agent_name: input.agentName ?? null,
    client_key: clientKey,
    cap: clientKey === null ? 0 : claims.openClaimsPerClient,
    reuse_min_life_seconds: input.reuseMinLifeSeconds ?? null,
    expires_at: expiresAt,
    held_until: new Date(expiresAt.getTime() + claims.amountHoldSeconds * 1000),
    amounts:
      claims.variant === "A" && input.flow !== "x402"
        ? uniqueAmountCandidates(claims.amountSpaceSize)
        : [],
  };
}

export function insertClaimResult(row: CreatedRow, cap: number): InsertClaimResult {
  if (row.outcome === "too_many_open_claims") return { type: row.outcome, limit: cap };
  return { type: row.outcome, claim: claimDetailsFromRow(row) };
}
