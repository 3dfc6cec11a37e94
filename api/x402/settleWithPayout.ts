import type { CompletionSignal } from "../claims/waitForClaim.ts";
import type { Sql } from "../db/connect.ts";
import { recordSettlementUnknown } from "../lifecycle/x402Records.ts";
import type { X402Status } from "./x402Payments.ts";

/** How a settlement by the payout sender ended, as the request sees it. */
export type SettledWithPayout =
  | { kind: "completed"; paymentResponse: string | null }
  | { kind: "failed"; reason: string }
  | { kind: "unknown" };

const POLL_MS = 25;
const POLL_WITH_SIGNAL_MS = 100;

/**
 * The request's side of a one-transaction settlement (docs/payments.md#one-transaction-settlement):
 * its authorization is recorded for the payout sender, which settles it and pays out in one
 * transaction; the confirmer stores that transaction's outcome (the claim completed with its
 * payment, or neither leg). This waits, at most `timeoutMs`, for that outcome. Past it the
 * outcome is unknown, as a settlement that timed out (202); the chain decides, and the claim
 * completes should the transaction be mined after all.
 */
export async function waitForSettlementWithPayout(
  sql: Sql,
  claimId: string,
  timeoutMs: number,
  completions?: CompletionSignal,
): Promise<SettledWithPayout> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // Armed before the read: a completion committed while the read is under way still wakes it.
    const woken = completions?.next(
      Math.max(0, Math.min(POLL_WITH_SIGNAL_MS, deadline - Date.now())),
    );
    const [row] = await sql<
      {
        claim_status: string;
        status: X402Status;
        failure_reason: string | null;
        payment_response: string | null;
      }[]
    >`
      select c.status as claim_status, x.status, x.failure_reason, x.payment_response
      from app.claims c join app.x402_payments x on x.claim_id = c.id
      where c.id = ${claimId}`;
    if (!row) throw new Error(`x402 claim ${claimId} vanished`);
    if (row.claim_status === "completed") {
      return { kind: "completed", paymentResponse: row.payment_response };
    }
    if (row.status === "failed") {
      return { kind: "failed", reason: row.failure_reason ?? "settlement_failed" };
    }
    if (row.status === "unknown" || row.status === "lost") return { kind: "unknown" };
    if (Date.now() >= deadline) {
      // Settled, and the claim not completed yet (a completion that failed and is retried):
      // answered as paid, without the receipt. Still settling: unknown from now on.
      if (row.status === "settled") {
        return { kind: "completed", paymentResponse: row.payment_response };
      }
      await recordSettlementUnknown(sql, claimId, null);
      return { kind: "unknown" };
    }
    await (woken ?? new Promise((resolve) => setTimeout(resolve, POLL_MS)));
  }
}
