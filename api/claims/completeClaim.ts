import type { Sql } from "../db/connect.ts";
import { issueReceipt, type ReceiptIssuer } from "../receipts/issueReceipt.ts";

/**
 * paying → completed, once the payout is mined: signs the receipt and queues the receipt mail
 * in the same transaction. Returns false when the claim was not `paying` (already done).
 */
export async function completeClaim(
  transaction: Sql,
  issuer: ReceiptIssuer,
  completion: { claimId: string; payoutTx: string },
): Promise<boolean> {
  const [claim] = await transaction<{ payout_address: string; email: string | null }[]>`
    update app.claims set status = 'completed', completed_at = now()
    where id = ${completion.claimId} and status = 'paying'
    returning payout_address, email`;
  if (!claim) return false;
  const [payment] = await transaction<{ tx_hash: string }[]>`
    select tx_hash from app.payments where claim_id = ${completion.claimId}`;
  if (!payment) throw new Error(`Claim ${completion.claimId} is paying without a payment`);
  await issueReceipt(transaction, issuer, {
    claimId: completion.claimId,
    holder: claim.payout_address,
    paymentTx: payment.tx_hash,
    payoutTx: completion.payoutTx,
  });
  if (claim.email) {
    await transaction`
      insert into app.outbox (kind, claim_id, recipient)
      values ('receipt_mail', ${completion.claimId}, ${claim.email})
      on conflict (kind, claim_id) do nothing`;
  }
  return true;
}

/** paying → failed, for a payout that can never succeed (it reverted on chain). Terminal. */
export async function failClaim(
  transaction: Sql,
  failure: { claimId: string; reason: string },
): Promise<boolean> {
  const rows = await transaction`
    update app.claims set status = 'failed', failure_reason = ${failure.reason}
    where id = ${failure.claimId} and status = 'paying'
    returning id`;
  return rows.length > 0;
}
