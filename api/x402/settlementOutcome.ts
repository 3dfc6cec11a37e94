import type { SettleResponse } from "@x402/core/types";
import { SettleError } from "@x402/core/types";

/** What a settlement attempt tells: done, refused for good, or not known. */
export type SettlementOutcome =
  | { kind: "settled"; response: SettleResponse }
  | { kind: "failed"; reason: string }
  | { kind: "unknown"; txHash: string | null; detail?: string | undefined };

type SettleAnswer = Pick<SettleResponse, "success" | "transaction" | "errorReason"> & {
  errorMessage?: string | undefined;
};

/**
 * A facilitator's answer, classified. Only a refusal made before anything was sent is a
 * failure: the facilitator's verification said no (an expired or used authorization, a bad
 * signature, too little USDC), or its transaction was mined and reverted. An error raised while
 * sending (the SDK then answers `success: false` with an `errorMessage` and often no
 * transaction, even when the node took the transaction), a pending settlement, a timeout or a
 * lost connection are unknown: the chain will tell, by the authorization's nonce.
 */
export function settlementOutcome(answer: SettleAnswer): SettlementOutcome {
  if (answer.success) return { kind: "settled", response: answer as SettleResponse };
  if (answer.errorReason === "settlement_pending" || answer.errorMessage !== undefined) {
    return {
      kind: "unknown",
      txHash: answer.transaction || null,
      detail: answer.errorMessage ?? answer.errorReason,
    };
  }
  return { kind: "failed", reason: answer.errorReason ?? "settlement_failed" };
}

/** A settle call that threw: a facilitator's refusal is classified as an answer; anything else is unknown. */
export function settlementErrorOutcome(error: unknown): SettlementOutcome {
  if (error instanceof SettleError) {
    return settlementOutcome({
      success: false,
      transaction: error.transaction,
      errorReason: error.errorReason,
      errorMessage: error.errorMessage,
    });
  }
  return { kind: "unknown", txHash: null, detail: String(error).slice(0, 300) };
}
