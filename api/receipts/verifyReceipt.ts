import { getAddress, type Hex, type PublicClient, recoverMessageAddress } from "viem";
import { readTransactionStatus, type TransactionStatus } from "../chain/transactionStatus.ts";
import type { Sql } from "../db/connect.ts";
import type { ReceiptVerdictReason } from "../reasons/reasonCatalog.ts";
import { readReceipt } from "./readReceipt.ts";
import { parseReceiptMessage } from "./receiptMessage.ts";

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
  deps: { sql: Sql; chain: PublicClient },
  receiptSigner: string,
  receipt: { message: string; signature: Hex },
): Promise<ReceiptVerdict> {
  const { sql } = deps;
  const expectedSigner = getAddress(receiptSigner);
  const facts = parseReceiptMessage(receipt.message);
  const claimId = facts?.Claim ?? null;
  const verdict = (fields: Partial<ReceiptVerdict> & Pick<ReceiptVerdict, "reason">) => ({
    genuine: false,
    current: false,
    signer: null,
    expectedSigner,
    claimId,
    chain: null,
    ...fields,
  });

  let signer: string;
  try {
    signer = await recoverMessageAddress({
      message: receipt.message,
      signature: receipt.signature,
    });
  } catch {
    return verdict({ reason: "bad_signature" });
  }
  if (signer !== expectedSigner) return verdict({ signer, reason: "signed_by_another_key" });
  if (!facts || !claimId) return verdict({ signer, genuine: true, reason: "not_a_receipt" });

  const paymentTx = facts["Payment tx"] ?? "";
  const payoutTx = facts["Payout tx"] ?? "";
  const chain =
    TX_HASH.test(paymentTx) && TX_HASH.test(payoutTx)
      ? await Promise.all([
          readTransactionStatus(deps.chain, paymentTx as Hex),
          readTransactionStatus(deps.chain, payoutTx as Hex),
        ]).then(([payment, payout]) => ({ payment, payout }))
      : null;
  const stored = await readReceipt(sql, claimId);
  if (!stored) return verdict({ signer, genuine: true, reason: "unknown_claim", chain });
  // The signature already proved our key signed this exact message; the message must also
  // be the one on record (receipts exist only for completed claims).
  const current = stored.message === receipt.message;
  return verdict({
    signer,
    genuine: true,
    current,
    reason: current ? "ok" : "superseded_or_altered",
    chain,
  });
}
