import type { PublicClient } from "viem";
import type { Sql } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { type BroadcastOutcome, describeOutcome } from "./broadcastError.ts";
import { recordBroadcastFailures, recordBroadcasts } from "./payoutRecords.ts";
import { sendRawTransactions } from "./payoutRpc.ts";
import type { PayoutTx } from "./signNewPayouts.ts";

export interface BroadcastSummary {
  /** Accepted by the node, or already known to it. */
  broadcast: number;
  /** Of those, the ones the node already had or had moved past (see broadcastError.ts). */
  alreadyKnown: number;
  insufficientFunds: number;
  failed: number;
}

/**
 * Sends stored payout transactions in nonce order, then records each outcome on its payout.
 * A broadcast payout (`signed` → `broadcast`) counts its broadcasts and when it was last sent;
 * a failure is data: `last_error` says why, and the payout waits for the next round. A payout
 * already `broadcast` gets `last_broadcast_at` moved even on failure, so its re-broadcast
 * timer spaces out the retries.
 */
export async function sendPayouts(
  sql: Sql,
  rpc: PublicClient,
  payouts: PayoutTx[],
): Promise<{ outcomes: BroadcastOutcome[]; summary: BroadcastSummary }> {
  const ordered = [...payouts].sort((a, b) => (a.nonce < b.nonce ? -1 : a.nonce > b.nonce ? 1 : 0));
  const outcomes = await sendRawTransactions(
    rpc,
    ordered.map((payout) => payout.rawTx),
  );
  await recordOutcomes(sql, ordered, outcomes);
  return { outcomes, summary: summarize(outcomes) };
}

export function summarize(outcomes: BroadcastOutcome[]): BroadcastSummary {
  const summary: BroadcastSummary = {
    broadcast: 0,
    alreadyKnown: 0,
    insufficientFunds: 0,
    failed: 0,
  };
  for (const outcome of outcomes) {
    if (outcome.kind === "known") summary.alreadyKnown += 1;
    if (outcome.kind === "accepted" || outcome.kind === "known") summary.broadcast += 1;
    else if (outcome.kind === "insufficient_funds") summary.insufficientFunds += 1;
    else summary.failed += 1;
  }
  return summary;
}

/** Stores what `sendRawTransactions` answered, one statement per kind of outcome. */
export async function recordOutcomes(
  sql: Sql,
  payouts: PayoutTx[],
  outcomes: BroadcastOutcome[],
): Promise<void> {
  const sent: string[] = [];
  const sentNotes: (string | null)[] = [];
  const failed: string[] = [];
  const failures: string[] = [];
  payouts.forEach((payout, index) => {
    const outcome = outcomes[index];
    if (!outcome) return;
    const note = describeOutcome(outcome);
    if (outcome.kind === "accepted" || outcome.kind === "known") {
      sent.push(String(payout.nonce));
      sentNotes.push(note);
    } else {
      failed.push(String(payout.nonce));
      failures.push(note ?? outcome.kind);
    }
  });
  await recordBroadcasts(sql, sent, sentNotes);
  await recordBroadcastFailures(sql, failed, failures);
}

/** Logs a round of broadcasts: counts only, never raw transactions. */
export function logBroadcast(
  logger: Logger,
  what: string,
  payouts: PayoutTx[],
  outcomes: BroadcastOutcome[],
  summary: BroadcastSummary,
  extra: Record<string, unknown> = {},
): void {
  if (payouts.length === 0) return;
  const firstFailure = outcomes.find(
    (outcome) => outcome.kind !== "accepted" && outcome.kind !== "known",
  );
  const fields = {
    payouts: payouts.length,
    ...summary,
    firstNonce: payouts[0]?.nonce.toString(),
    ...(firstFailure ? { error: describeOutcome(firstFailure) } : {}),
    ...extra,
  };
  if (summary.broadcast === payouts.length) logger.info(fields, what);
  else logger.warn(fields, `${what}: some were not accepted`);
}
