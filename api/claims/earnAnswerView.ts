import type { z } from "zod";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { StoredReceipt } from "../receipts/readReceipt.ts";
import { receiptInAnswerView } from "../receipts/receiptView.ts";
import type { x402PaidResponse, x402PendingResponse } from "../schemas/responses.ts";
import { claimLinks, claimView } from "./claimView.ts";
import type { ClaimDetails } from "./readClaim.ts";

/**
 * The answer to a paid x402 call, on every transport (HTTP 200, the MCP tool's result, the A2A
 * task's artifact): see `x402PaidResponse`. The receipt is null when the payout was not mined
 * within the bounded wait.
 */
export function paidAnswerView(
  config: ServiceConfig,
  claim: ClaimDetails,
  receipt: StoredReceipt | null,
): z.infer<typeof x402PaidResponse> {
  const view = claimView(config, claim);
  return {
    claim_id: claim.id,
    status: claim.status,
    payout_tx: view.payout_tx,
    receipt: receipt ? receiptInAnswerView(receipt) : null,
    payment: view.payment,
    payout_address: view.payout_address,
    agent_name: view.agent_name,
    status_url: view.status_url,
    receipt_url: view.receipt_url,
    ...(receipt
      ? {}
      : {
          detail:
            "Paid and settled. The payout is not mined yet: poll status_url; the receipt " +
            "appears at receipt_url once the claim is completed.",
        }),
  };
}

/** A settlement whose outcome is not known yet: the claim is on record (`x402PendingResponse`). */
export function pendingAnswerView(
  config: ServiceConfig,
  claim: ClaimDetails,
): z.infer<typeof x402PendingResponse> {
  return {
    claim_id: claim.id,
    status: claim.status,
    ...claimLinks(config, claim.id),
    detail:
      "The settlement's outcome is not known yet. Nothing will be charged twice: poll " +
      "status_url; the claim completes when the payment appears on chain.",
  };
}

/** An x402 answer with the claim's webhook secret, when its creation registered a webhook_url. */
export function withWebhookSecret<View extends object>(
  view: View,
  webhookSecret: string | undefined,
): View & { webhook_secret?: string } {
  return webhookSecret === undefined ? view : { ...view, webhook_secret: webhookSecret };
}
