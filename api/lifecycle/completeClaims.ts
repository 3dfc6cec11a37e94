import type { Sql } from "../db/connect.ts";
import { issueReceipts, type ReceiptIssuer } from "../receipts/issueReceipt.ts";
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
}

/**
 * paying → completed, the one writer of this transition, for many claims at once (a burst's
 * payouts are mined by the thousand): locks the claims, and for those `paying` with their
 * payment signs the receipts, stores them, queues the receipt mails and announces the
 * completion, all in the caller's transaction, in a fixed number of statements. A claim not
 * `paying`, or without a payment, is left as it is and reported.
 */
export async function completeClaims(
  transaction: Sql,
  issuer: ReceiptIssuer,
  completions: Completion[],
): Promise<CompletionResult> {
  const result: CompletionResult = { completed: [], notPaying: [], withoutPayment: [] };
  if (completions.length === 0) return result;
  const claims = await transaction<
    {
      id: string;
      status: string;
      payout_address: string;
      email: string | null;
      payment_tx: string | null;
      payment_block: bigint | null;
    }[]
  >`
    select c.id, c.status, c.payout_address, c.email,
      p.tx_hash as payment_tx, p.block_number as payment_block
    from app.claims c left join app.payments p on p.claim_id = c.id
    where c.id = any(${completions.map((completion) => completion.claimId)})
    order by c.id
    for update of c`;
  const byId = new Map(claims.map((claim) => [claim.id, claim]));
  const completing: (Completion & (typeof claims)[number])[] = [];
  for (const completion of completions) {
    const claim = byId.get(completion.claimId);
    if (claim?.status !== "paying") {
      result.notPaying.push({ claimId: completion.claimId, status: claim?.status ?? "unknown" });
    } else if (claim.payment_tx === null || claim.payment_block === null) {
      result.withoutPayment.push(completion.claimId);
    } else {
      completing.push({ ...completion, ...claim });
    }
  }
  if (completing.length === 0) return result;

  await transaction`
    update app.claims set status = 'completed', completed_at = now()
    where id = any(${completing.map((claim) => claim.id)}) and status = 'paying'`;
  await issueReceipts(
    transaction,
    issuer,
    completing.map((claim) => ({
      claimId: claim.id,
      holder: claim.payout_address,
      paymentTx: claim.payment_tx as string,
      paymentBlock: BigInt(claim.payment_block as bigint),
      payoutTx: claim.payoutTx,
      payoutBlock: claim.payoutBlock,
    })),
  );
  const mails = completing.flatMap((claim) =>
    claim.email
      ? [
          {
            kind: "receipt_mail",
            claim_id: claim.id,
            recipient: claim.email,
            idempotency_key: `receipt_mail:${claim.id}`,
          },
        ]
      : [],
  );
  if (mails.length > 0) {
    await transaction`
      insert into app.outbox ${transaction(mails)}
      on conflict (idempotency_key) do nothing`;
  }
  // The ledger's cached totals are out of date from the commit on (one NOTIFY per transaction).
  await wakeWorker(transaction, WAKE_CHANNELS.claimsCompleted);
  result.completed = completing.map((claim) => claim.id);
  return result;
}
