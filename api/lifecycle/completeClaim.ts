import type { Sql } from "../db/connect.ts";
import { issueReceipt, type ReceiptIssuer } from "../receipts/issueReceipt.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";

/**
 * paying → completed, the one writer of this transition, once the payout is mined: signs the receipt and queues the receipt mail
 * in the same transaction. Returns false when the claim was not `paying` (already done).
 */
export async function completeClaim(
  transaction: Sql,
  issuer: ReceiptIssuer,
  completion: { claimId: string; payoutTx: string; payoutBlock: bigint },
): Promise<boolean> {
  const [claim] = await transaction<{ payout_address: string; email: string | null }[]>`
    update app.claims set status = 'completed', completed_at = now()
    where id = ${completion.claimId} and status = 'paying'
    returning payout_address, email`;
  if (!claim) return false;
  const [payment] = await transaction<{ tx_hash: string; block_number: bigint }[]>`
    select tx_hash, block_number from app.payments where claim_id = ${completion.claimId}`;
  if (!payment) throw new Error(`Claim ${completion.claimId} is paying without a payment`);
  await issueReceipt(transaction, issuer, {
    claimId: completion.claimId,
    holder: claim.payout_address,
    paymentTx: payment.tx_hash,
    paymentBlock: payment.block_number,
    payoutTx: completion.payoutTx,
    payoutBlock: completion.payoutBlock,
  });
  // The ledger's cached totals are out of date from the commit on (one NOTIFY per transaction).
  await wakeWorker(transaction, WAKE_CHANNELS.claimsCompleted);
  if (claim.email) {
    await transaction`
      insert into app.outbox (kind, claim_id, recipient, idempotency_key)
      values ('receipt_mail', ${completion.claimId}, ${claim.email}, ${`receipt_mail:${completion.claimId}`})
      on conflict (idempotency_key) do nothing`;
  }
  return true;
}
