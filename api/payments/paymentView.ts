import type { z } from "zod";
import { explorerTx } from "../chain/explorerLinks.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { formatUsdcFixed } from "../money.ts";
import { UNMATCHED_REASONS } from "../reasons/reasonCatalog.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import type { paymentExplanationResponse } from "../schemas/responses.ts";
import type { PaymentExplanation, TransferExplanation } from "./explainPayment.ts";

function explain(transfer: TransferExplanation, confirmationsNeeded: number): string {
  switch (transfer.state) {
    case "paid_claim":
      return `Paid claim ${transfer.claimId} (matched by ${transfer.matchedBy}).`;
    case "unmatched":
      return UNMATCHED_REASONS[transfer.reason ?? "no_matching_claim"];
    case "awaiting_confirmations":
      return `Waiting for ${confirmationsNeeded} blocks on top before it is matched.`;
    case "not_indexed_yet":
      return "Mined; the indexer has not recorded it yet. Check again in a few seconds.";
  }
}

/** "What happened to my payment?" as clients see it: see `paymentExplanationResponse`. */
export function paymentView(
  config: ServiceConfig,
  explanation: PaymentExplanation,
): z.infer<typeof paymentExplanationResponse> {
  const { transfers } = explanation;
  return {
    tx_hash: explanation.txHash,
    explorer_url: explorerTx(config, explanation.txHash),
    pay_to: config.chain.payTo,
    summary: explanation.reverted
      ? "The transaction reverted: it moved no USDC."
      : transfers.length === 0
        ? "The transaction sent no USDC to pay_to."
        : `${transfers.length} USDC transfer(s) to pay_to.`,
    transfers: transfers.map((transfer) => ({
      log_index: transfer.logIndex,
      from: checksummed(transfer.from),
      amount_usdc: formatUsdcFixed(transfer.value),
      block_number: Number(transfer.blockNumber),
      confirmations: transfer.confirmations,
      state: transfer.state,
      claim_id: transfer.claimId,
      claim_status: transfer.claimStatus,
      matched_by: transfer.matchedBy,
      reason: transfer.reason,
      explanation: explain(transfer, config.chain.confirmations),
    })),
  };
}
