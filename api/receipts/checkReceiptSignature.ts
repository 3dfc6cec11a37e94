import { getAddress, type Hex, recoverMessageAddress } from "viem";
import { parseReceiptMessage } from "./receiptMessage.ts";

export interface ReceiptSignatureCheck {
  /** Who signed this exact message (EIP-191); null when the signature cannot be read. */
  signer: string | null;
  expectedSigner: string;
  /** The message's facts (`Claim`, `Holder`, `Payment tx` …); null when it is not a receipt. */
  facts: Record<string, string> | null;
  /** Null when the receipt key signed a receipt; else what is wrong. */
  problem: "bad_signature" | "signed_by_another_key" | "not_a_receipt" | null;
}

/**
 * What a receipt proves by itself, with nothing but viem: signed by `receiptSigner`, and shaped
 * as a receipt. The service adds whether it is the receipt on record (verifyReceipt.ts); the CLI
 * checks this much offline.
 */
export async function checkReceiptSignature(
  receipt: { message: string; signature: Hex },
  receiptSigner: string,
): Promise<ReceiptSignatureCheck> {
  const expectedSigner = getAddress(receiptSigner);
  const facts = parseReceiptMessage(receipt.message);
  let signer: string;
  try {
    signer = await recoverMessageAddress({
      message: receipt.message,
      signature: receipt.signature,
    });
  } catch {
    return { signer: null, expectedSigner, facts, problem: "bad_signature" };
  }
  if (signer !== expectedSigner) {
    return { signer, expectedSigner, facts, problem: "signed_by_another_key" };
  }
  return { signer, expectedSigner, facts, problem: facts?.Claim ? null : "not_a_receipt" };
}
