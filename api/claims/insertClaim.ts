import type { Address } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { newClaimId } from "./claimIds.ts";
import { reserveUniqueAmount } from "./reserveAmount.ts";

export type ClaimFlow = "claim" | "x402" | "mail";

export interface NewClaim {
  flow: ClaimFlow;
  payoutAddress: Address;
  email?: string | undefined;
  agentName?: string | undefined;
  /** A digest of who asked (`clientKey`), counted against OPEN_CLAIMS_PER_CLIENT. */
  clientKey?: string | undefined;
}

export interface InsertedClaim {
  claimId: string;
  amountDue: bigint;
  expiresAt: Date;
}

/**
 * Writes a new claim, awaiting payment, in the caller's transaction: the birth of every claim,
 * whichever flow. Variant A reserves the claim's unique amount (x402 claims are paid by their
 * authorization, never by amount). When no unique amount is free (the space is full, or
 * flooded), the claim still opens, at the plain price and without one: it is then paid like a
 * variant B claim, by its payout address or a named tx hash (`hasUniqueAmount`), and says so.
 */
export async function insertClaim(
  transaction: Sql,
  config: Pick<ServiceConfig, "claims">,
  input: NewClaim,
): Promise<InsertedClaim> {
  const { claims } = config;
  const claimId = newClaimId();
  const expiresAt = new Date(Date.now() + claims.lifetimeSeconds * 1000);
  await transaction`
    insert into app.claims
      (id, flow, payout_address, email, agent_name, amount_due, expires_at, client_key)
    values (${claimId}, ${input.flow}, ${input.payoutAddress.toLowerCase()},
      ${input.email ?? null}, ${input.agentName ?? null}, ${String(PRICE_ATOMIC)}, ${expiresAt},
      ${input.clientKey ?? null})`;

  let amountDue = PRICE_ATOMIC;
  if (claims.variant === "A" && input.flow !== "x402") {
    const heldUntil = new Date(expiresAt.getTime() + claims.amountHoldSeconds * 1000);
    const reserved = await reserveUniqueAmount(
      transaction,
      claimId,
      heldUntil,
      claims.amountSpaceSize,
    );
    if (reserved !== null) {
      amountDue = reserved;
      await transaction`update app.claims set amount_due = ${String(amountDue)} where id = ${claimId}`;
    }
  }
  return { claimId, amountDue, expiresAt };
}
