import type { Hex } from "viem";
import { RECEIPT_VERDICT_REASONS } from "../api/reasons/reasonCatalog.ts";
import { checkReceiptSignature } from "../api/receipts/checkReceiptSignature.ts";

export type OfflineVerdictReason =
  | "ok"
  | "bad_signature"
  | "signed_by_another_key"
  | "not_a_receipt";

export interface OfflineVerdict {
  valid: boolean;
  reason: OfflineVerdictReason;
  words: string;
  signer: string | null;
  expectedSigner: string;
  /** The receipt's own lines (Holder, Claim, Payment tx …); null when it is not a receipt. */
  facts: Record<string, string> | null;
}

/**
 * The receipt checked with nothing but viem: who signed this exact message (EIP-191), and is it
 * the service's receipt key? Whether it is still the receipt on record, and where its
 * transactions stand now, only the service can say (POST /api/receipts/verify).
 */
export async function checkReceiptOffline(
  receipt: { message: string; signature: Hex },
  receiptSigner: string,
): Promise<OfflineVerdict> {
  const check = await checkReceiptSignature(receipt, receiptSigner);
  const reason = check.problem ?? "ok";
  return {
    valid: reason === "ok",
    reason,
    words:
      reason === "ok"
        ? "Signed by the service's receipt key: the holder earned what the message says."
        : RECEIPT_VERDICT_REASONS[reason],
    signer: check.signer,
    expectedSigner: check.expectedSigner,
    facts: check.facts,
  };
}
