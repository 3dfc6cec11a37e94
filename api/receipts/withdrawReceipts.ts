import type { Sql, Transaction } from "../db/connect.ts";

/** Why a receipt was taken back (docs/operating.md#payout-reorgs). */
export type WithdrawalReason = "payout_undone" | "payout_replaced";

/**
 * Moves the claims' receipts on record to `app.withdrawn_receipts`, word for word, in the
 * caller's transaction: they stop being current, and verification can still say what became of
 * them. Returns the claims whose receipt was moved.
 */
export async function withdrawReceipts(
  transaction: Transaction,
  claimIds: string[],
  reason: WithdrawalReason,
): Promise<string[]> {
  if (claimIds.length === 0) return [];
  const moved = await transaction<{ claim_id: string }[]>`
    with taken as (
      delete from app.receipts
      where claim_id = any(${transaction.array(claimIds)}::text[])
      returning claim_id, message, signature, signer, issued_at)
    insert into app.withdrawn_receipts (claim_id, message, signature, signer, issued_at, reason)
    select claim_id, message, signature, signer, issued_at, ${reason} from taken
    returning claim_id`;
  return moved.map((row) => row.claim_id);
}

/** The receipt of `claimId` taken back with exactly this message, if any. */
export async function readWithdrawnReceipt(
  sql: Sql,
  claimId: string,
  message: string,
): Promise<{ reason: WithdrawalReason; withdrawnAt: Date } | null> {
  const [row] = await sql<{ reason: WithdrawalReason; withdrawn_at: Date }[]>`
    select reason, withdrawn_at from app.withdrawn_receipts
    where claim_id = ${claimId} and message = ${message}
    order by id desc limit 1`;
  return row ? { reason: row.reason, withdrawnAt: row.withdrawn_at } : null;
}
