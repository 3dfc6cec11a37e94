import { getAddress, type Hex, recoverMessageAddress } from "viem";
import { readReceipt } from "../claims/readClaim.ts";
import type { Sql } from "../db/connect.ts";
import { parseReceiptMessage } from "./receiptMessage.ts";

export interface ReceiptVerdict {
  /** Signed by this service's receipt key. */
  genuine: boolean;
  /** The receipt this service holds for a completed claim, word for word. */
  current: boolean;
  valid: boolean;
  signer: string | null;
  expected_signer: string;
  claim_id: string | null;
  reason:
    | "ok"
    | "bad_signature"
    | "signed_by_another_key"
    | "not_a_receipt"
    | "unknown_claim"
    | "superseded_or_altered";
}

/** POST /api/receipts/verify: is this receipt ours (genuine) and the one on record (current)? */
export async function verifyReceipt(
  sql: Sql,
  receiptSigner: string,
  receipt: { message: string; signature: Hex },
): Promise<ReceiptVerdict> {
  const expected = getAddress(receiptSigner);
  const facts = parseReceiptMessage(receipt.message);
  const claimId = facts?.Claim ?? null;
  const verdict = (fields: Partial<ReceiptVerdict> & Pick<ReceiptVerdict, "reason">) => ({
    genuine: false,
    current: false,
    valid: false,
    signer: null,
    expected_signer: expected,
    claim_id: claimId,
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
  if (signer !== expected) return verdict({ signer, reason: "signed_by_another_key" });
  if (!facts || !claimId) return verdict({ signer, genuine: true, reason: "not_a_receipt" });

  const stored = await readReceipt(sql, claimId);
  if (!stored) return verdict({ signer, genuine: true, reason: "unknown_claim" });
  // The signature already proved our key signed this exact message; the message must also
  // be the one on record (receipts exist only for completed claims).
  const current = stored.message === receipt.message;
  return verdict({
    signer,
    genuine: true,
    current,
    valid: current,
    reason: current ? "ok" : "superseded_or_altered",
  });
}
