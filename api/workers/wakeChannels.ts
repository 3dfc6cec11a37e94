import type { Sql } from "../db/connect.ts";

/**
 * NOTIFY channels that wake a worker as soon as there is work for it, in whichever process it
 * runs. Sent inside the transaction that creates the work, PostgreSQL delivers them on commit.
 */
export const WAKE_CHANNELS = {
  /** Claims became `paid`: the payout sender has something to sign. */
  payoutSender: "pay_and_earn_claims_paid",
  /** Payouts were broadcast: the confirmer should look for them in new blocks. */
  payoutConfirmer: "pay_and_earn_payouts_broadcast",
  /** An inbound mail was stored: the mail processor has something to act on. */
  mailProcessor: "pay_and_earn_mail_received",
  /** A mail was queued (a trigger on app.outbox sends it, migration 0008): the sender sends it. */
  mailSender: "pay_and_earn_outbox",
  /** Claims completed: the ledger's cached totals and stats are out of date. */
  claimsCompleted: "pay_and_earn_claims_completed",
  /**
   * Events were written (by migration 0024's triggers, with the change): the webhook worker has
   * deliveries to make, and the event streams something to send.
   */
  events: "pay_and_earn_events",
  /**
   * The indexer committed a new block: the matcher has transfers or confirmations to look at.
   * Ponder's own NOTIFY, from the trigger it puts on its checkpoint for the `chain` views' live
   * queries; sent for blocks indexed live, not during the backfill, where polling carries on
   * (docs/traps.md#ponder).
   */
  indexerProgress: "chain_live_query",
} as const;

export type WakeChannel = (typeof WAKE_CHANNELS)[keyof typeof WAKE_CHANNELS];

export async function wakeWorker(
  sql: Sql,
  channel: Exclude<WakeChannel, typeof WAKE_CHANNELS.indexerProgress>,
): Promise<void> {
  await sql`select pg_notify(${channel}, '')`;
}
