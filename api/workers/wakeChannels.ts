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
} as const;

export async function wakeWorker(
  sql: Sql,
  channel: (typeof WAKE_CHANNELS)[keyof typeof WAKE_CHANNELS],
): Promise<void> {
  await sql`select pg_notify(${channel}, '')`;
}
