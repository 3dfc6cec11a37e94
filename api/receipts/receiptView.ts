import type { z } from "zod";
import type { TransactionStatus } from "../chain/transactionStatus.ts";
import type { receiptResponse } from "../schemas/responses.ts";
import type { StoredReceipt } from "./readReceipt.ts";
import type { ReceiptVerdict } from "./verifyReceipt.ts";

/** A receipt as clients get it (REST, MCP, A2A, mail, the CLI): see `receiptResponse`. */
export function receiptView(
  receipt: StoredReceipt,
  verifyUrl: string,
): z.infer<typeof receiptResponse> {
  return {
    claim_id: receipt.claimId,
    message: receipt.message,
    signature: receipt.signature,
    signer: receipt.signer,
    issued_at: receipt.issuedAt.toISOString(),
    verify_url: verifyUrl,
  };
}

/** The receipt inside an x402 answer: the signed facts, without links. */
export function receiptInAnswerView(receipt: StoredReceipt) {
  return {
    message: receipt.message,
    signature: receipt.signature,
    signer: receipt.signer,
    issued_at: receipt.issuedAt.toISOString(),
  };
}

/** POST /api/receipts/verify's answer. */
export function receiptVerdictView(verdict: ReceiptVerdict) {
  return {
    genuine: verdict.genuine,
    current: verdict.current,
    valid: verdict.current,
    signer: verdict.signer,
    expected_signer: verdict.expectedSigner,
    claim_id: verdict.claimId,
    reason: verdict.reason,
    chain: verdict.chain && {
      payment: transactionStatusView(verdict.chain.payment),
      payout: transactionStatusView(verdict.chain.payout),
    },
  };
}

function transactionStatusView(status: TransactionStatus) {
  return {
    state: status.state,
    block_number: status.blockNumber === null ? null : Number(status.blockNumber),
    confirmations: status.confirmations,
  };
}
