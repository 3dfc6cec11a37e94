import type { Transaction } from "../db/connect.ts";
import { queueReceiptMails, type ReceiptMail } from "../mailbox/outbox.ts";
import { issueReceipts, type ReceiptIssuer } from "../receipts/issueReceipt.ts";
import { withdrawReceipts } from "../receipts/withdrawReceipts.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";

/** A claim whose payout is mined, in the block that names it in the receipt. */
export interface Completion {
  claimId: string;
  payoutTx: string;
  payoutBlock: bigint;
}

export interface CompletionResult {
  completed: string[];
  /** Not `paying`: completed already (a payout a reorg took and the chain mined again) or else. */
  notPaying: { claimId: string; status: string }[];
  /** `paying` without a payment: an invariant broken; left as it is, for a person. */
  withoutPayment: string[];
  /**
   * Completed already, with a receipt naming another attempt of the payout's nonce (a reorg
   * mined the replacement instead): the receipt was signed again naming the mined one.
   */
  receiptRenamed: string[];
}

/**
 * paying → completed, the one writer of this transition, for many claims at once (a burst's
 * payouts are mined by the thousand): locks the claims, and for those `paying` with their
 * payment signs the receipts, stores them, queues the receipt mails and announces the
 * completion, all in the caller's transaction, in a fixed number of statements. A claim not
 * `paying`, or without a payment, is left as it is and reported.
 *
 * After a reorg (docs/operating.md#payout-reorgs), the payout mined may differ from the one the
 * claim was completed or failed with: a claim `failed` because its payout reverted, whose payout
 * the new branch mines successfully, is completed (failed → completed: the USDC went out); a
 * claim completed already whose receipt names another attempt of the same nonce gets its
 * receipt signed again naming the attempt mined, the old one withdrawn.
 */
export async function completeClaims(
  transaction: Transaction,
  issuer: ReceiptIssuer,
  completions: Completion[],
): Promise<CompletionResult> {
  const result: CompletionResult = {
    completed: [],
    notPaying: [],
    withoutPayment: [],
    receiptRenamed: [],
  };
  if (completions.length === 0) return result;
  const claims = await transaction<
    {
      id: string;
      status: string;
      failure_reason: string | null;
      receipt_payout_tx: string | null;
      receipt_withdrawn: boolean;
      payout_address: string;
      email: string | null;
      payment_tx: string | null;
      payment_block: bigint | null;
    }[]
  >`
    select c.id, c.status, c.failure_reason, c.payout_address, c.email,
      p.tx_hash as payment_tx, p.block_number as payment_block,
      substring(r.message from 'Payout tx: (0x[0-9a-fA-F]{64})') as receipt_payout_tx,
      exists (select 1 from app.withdrawn_receipts w where w.claim_id = c.id) as receipt_withdrawn
    from app.claims c left join app.payments p on p.claim_id = c.id
      left join app.receipts r on r.claim_id = c.id
    where c.id = any(${completions.map((completion) => completion.claimId)})
    order by c.id
    for update of c`;
  const byId = new Map(claims.map((claim) => [claim.id, claim]));
  const completing: (Completion & (typeof claims)[number])[] = [];
  const renaming: (Completion & (typeof claims)[number])[] = [];
  for (const completion of completions) {
    const claim = byId.get(completion.claimId);
    const revertUndone = claim?.status === "failed" && claim.failure_reason === "payout_reverted";
    if (
      claim?.status === "completed" &&
      claim.receipt_payout_tx !== null &&
      claim.payment_tx !== null &&
      claim.payment_block !== null &&
      claim.receipt_payout_tx.toLowerCase() !== completion.payoutTx.toLowerCase()
    ) {
      renaming.push({ ...completion, ...claim });
      result.notPaying.push({ claimId: completion.claimId, status: claim.status });
    } else if (claim?.status !== "paying" && !revertUndone) {
      result.notPaying.push({ claimId: completion.claimId, status: claim?.status ?? "unknown" });
    } else if (claim.payment_tx === null || claim.payment_block === null) {
      result.withoutPayment.push(completion.claimId);
    } else {
      completing.push({ ...completion, ...claim });
    }
  }
  if (renaming.length > 0) {
    result.receiptRenamed = await withdrawReceipts(
      transaction,
      renaming.map((claim) => claim.id),
      "payout_replaced",
    );
  }
  if (completing.length === 0 && renaming.length === 0) return result;

  if (completing.length > 0) {
    await transaction`
      update app.claims set status = 'completed', completed_at = now(), failure_reason = null
      where id = any(${completing.map((claim) => claim.id)})
        and (status = 'paying' or (status = 'failed' and failure_reason = 'payout_reverted'))`;
  }
  await issueReceipts(
    transaction,
    issuer,
    [...completing, ...renaming].map((claim) => ({
      claimId: claim.id,
      holder: claim.payout_address,
      paymentTx: claim.payment_tx as string,
      paymentBlock: BigInt(claim.payment_block as bigint),
      payoutTx: claim.payoutTx,
      payoutBlock: claim.payoutBlock,
    })),
  );
  // A receipt signed again after one was withdrawn is mailed too: keyed by its payout.
  const mails = [...completing, ...renaming].flatMap((claim): ReceiptMail[] =>
    claim.email
      ? [
          {
            kind: "receipt_mail",
            claim_id: claim.id,
            recipient: claim.email,
            idempotency_key:
              claim.receipt_withdrawn || renaming.includes(claim)
                ? `receipt_mail:${claim.id}:${claim.payoutTx.toLowerCase()}`
                : `receipt_mail:${claim.id}`,
          },
        ]
      : [],
  );
  await queueReceiptMails(transaction, mails);
  // The ledger's cached totals are out of date from the commit on (one NOTIFY per transaction).
  await wakeWorker(transaction, WAKE_CHANNELS.claimsCompleted);
  result.completed = completing.map((claim) => claim.id);
  return result;
}
