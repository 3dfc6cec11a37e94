import type { Transaction } from "../db/connect.ts";
import { withdrawReceipts } from "../receipts/withdrawReceipts.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";

/**
 * completed → paying, the one writer of this transition: the payout the claim's receipt names
 * was taken away by a reorg and mined again as reverted (docs/operating.md#payout-reorgs). The
 * receipt is withdrawn (kept in `app.withdrawn_receipts`, so verification answers
 * `payout_undone`) and the claim waits, `paying`, for its reverted payout to be final; then the
 * sender signs it a new one (DESIGN.md §6: the reverted nonce is consumed, so one payout at
 * most can ever succeed). Only when the receipt names an attempt of `nonce`: a completion that
 * rests on another payout is not touched. Runs in the caller's transaction; true when undone.
 */
export async function undoCompletion(
  transaction: Transaction,
  undo: { claimId: string; nonce: bigint },
): Promise<boolean> {
  const undone = await transaction<{ id: string }[]>`
    update app.claims c set status = 'paying', completed_at = null
    from app.receipts r
    where c.id = ${undo.claimId} and c.status = 'completed' and r.claim_id = c.id
      and exists (
        select 1 from app.payout_attempts a
        where a.nonce = ${undo.nonce}
          and lower(a.tx_hash) = lower(substring(r.message from 'Payout tx: (0x[0-9a-fA-F]{64})')))
    returning c.id`;
  if (undone.length === 0) return false;
  await withdrawReceipts(transaction, [undo.claimId], "payout_undone");
  // The ledger's cached totals counted this claim.
  await wakeWorker(transaction, WAKE_CHANNELS.claimsCompleted);
  return true;
}
