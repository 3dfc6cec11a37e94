import type { Hex } from "viem";
import type { PublicChainReads } from "../chain/publicChainReads.ts";
import { readTransactionStatus, type TransactionStatus } from "../chain/transactionStatus.ts";
import type { Sql } from "../db/connect.ts";
import type { ReceiptVerdictReason } from "../reasons/reasonCatalog.ts";
import { checkReceiptSignature } from "./checkReceiptSignature.ts";
import { readReceipt } from "./readReceipt.ts";
import { readWithdrawnReceipt } from "./withdrawReceipts.ts";

export interface ReceiptVerdict {
  /** Signed by this service's receipt key. */
  genuine: boolean;
  /** The receipt this service holds for a completed claim, word for word. */
  current: boolean;
  signer: string | null;
  expectedSigner: string;
  claimId: string | null;
  reason: ReceiptVerdictReason;
  /**
   * What the chain says now of the payment and the payout the receipt names: a receipt is
   * signed once the payout is mined, and a reorg could still take either away. Null unless the
   * receipt is genuine and names them.
   */
  chain: { payment: TransactionStatus; payout: TransactionStatus } | null;
}

const TX_HASH = /^0x[0-9a-f]{64}$/;

/**
 * Is this receipt ours (genuine), the one on record (current), and are the transactions it
 * names still on chain?
 */
export async function verifyReceipt(
  deps: { sql: Sql; reads: PublicChainReads },
  receiptSigner: string,
  receipt: { message: string; signature: Hex },
): Promise<ReceiptVerdict> {
  const { sql } = deps;
  const check = await checkReceiptSignature(receipt, receiptSigner);
  const { signer, expectedSigner, facts } = check;
  const claimId = facts?.Claim ?? null;
  const verdict = (fields: Partial<ReceiptVerdict> & Pick<ReceiptVerdict, "reason">) => ({
    genuine: false,
    current: false,
    signer,
    expectedSigner,
    claimId,
    chain: null,
    ...fields,
  });
  if (check.problem === "bad_signature" || check.problem === "signed_by_another_key") {
    return verdict({ reason: check.problem });
  }
  if (check.problem === "not_a_receipt" || !facts || !claimId) {
    return verdict({ genuine: true, reason: "not_a_receipt" });
  }

  const paymentTx = facts["Payment tx"] ?? "";
  const payoutTx = facts["Payout tx"] ?? "";
  const chain =
    TX_HASH.test(paymentTx) && TX_HASH.test(payoutTx)
      ? await Promise.all([
          readTransactionStatus(deps.reads, paymentTx as Hex),
          readTransactionStatus(deps.reads, payoutTx as Hex),
        ]).then(([payment, payout]) => ({ payment, payout }))
      : null;
  const [stored, withdrawn] = await Promise.all([
    readReceipt(sql, claimId),
    readWithdrawnReceipt(sql, claimId, receipt.message),
  ]);
  // Taken back because a reorg undid its payout (docs/operating.md#payout-reorgs): never
  // current, whatever the chain shows of the transaction it names.
  if (withdrawn?.reason === "payout_undone") {
    return verdict({ genuine: true, reason: "payout_undone", chain });
  }
  if (!stored) return verdict({ genuine: true, reason: "unknown_claim", chain });
  // The signature already proved our key signed this exact message; the message must also
  // be the one on record (receipts exist only for completed claims).
  const current = stored.message === receipt.message;
  return verdict({
    genuine: true,
    current,
    reason: current ? "ok" : "superseded_or_altered",
    chain,
  });
}
