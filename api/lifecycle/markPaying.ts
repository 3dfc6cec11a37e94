import type { Transaction } from "../db/connect.ts";

/**
 * paid → paying: the one writer of this transition, run by the payout sender in the
 * transaction that stores the claims' signed payouts. Throws unless every claim was `paid`
 * (the caller locked them), so the caller's transaction rolls back whole.
 */
export async function markPaying(transaction: Transaction, claimIds: string[]): Promise<void> {
  if (claimIds.length === 0) return;
  const marked = await transaction`
    update app.claims set status = 'paying'
    where id = any(${transaction.array(claimIds)}::text[]) and status = 'paid'`;
  if (marked.count !== claimIds.length) {
    throw new Error(`Marked ${marked.count} of ${claimIds.length} claims paying; rolling back`);
  }
}
