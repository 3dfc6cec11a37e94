import type { Transaction } from "../db/connect.ts";

/** Why a claim failed, stored as its `failure_reason`. */
export type FailureReason = "payout_reverted" | "x402_settlement_failed";

/**
 * → failed, terminal: the one writer of this transition. From `paying` when the payout can
 * never succeed (it reverted on chain); from `awaiting_payment` when an x402 settlement was
 * refused for good (the claim must not stay open). Returns false when the claim was not in
 * the state the failure applies to (already decided by someone else).
 */
export async function failClaim(
  transaction: Transaction,
  failure: { claimId: string; reason: FailureReason },
): Promise<boolean> {
  const from = failure.reason === "payout_reverted" ? "paying" : "awaiting_payment";
  const rows = await transaction`
    update app.claims set status = 'failed', failure_reason = ${failure.reason}
    where id = ${failure.claimId} and status = ${from}
    returning id`;
  return rows.length > 0;
}
