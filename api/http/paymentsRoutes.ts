import { Router } from "express";
import { getAddress } from "viem";
import { formatUsdcFixed } from "../money.ts";
import { explainPayment, type TransferExplanation } from "../payments/explainPayment.ts";
import { txHashInput } from "../schemas/inputs.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { explorerTx } from "./claimResponses.ts";
import { problem, sendProblem } from "./problem.ts";

const UNMATCHED_WORDS: Record<string, string> = {
  below_price: "Below the price of 10 USDC: it earns nothing and is not refunded.",
  claim_expired: "The claim it would have paid had expired when it was mined. Not refunded.",
  claim_already_paid: "The claim it would have paid was already paid by another transfer.",
  no_matching_claim:
    "No open claim matched it (wrong amount, another sender, or no claim). Attach its hash to a claim if it qualifies.",
};

function explain(transfer: TransferExplanation, confirmationsNeeded: number): string {
  switch (transfer.state) {
    case "paid_claim":
      return `Paid claim ${transfer.claimId} (matched by ${transfer.matchedBy}).`;
    case "unmatched":
      return UNMATCHED_WORDS[transfer.reason ?? "no_matching_claim"] ?? "Unmatched.";
    case "awaiting_confirmations":
      return `Waiting for ${confirmationsNeeded} blocks on top before it is matched.`;
    case "not_indexed_yet":
      return "Mined; the indexer has not recorded it yet. Check again in a few seconds.";
  }
}

export function paymentsRoutes(deps: ServiceDeps): Router {
  const router = Router();
  const { config } = deps;

  router.get("/api/payments/:txHash", async (request, response) => {
    const hash = txHashInput.safeParse(request.params.txHash);
    if (!hash.success) {
      return sendProblem(
        response,
        problem("invalid_request", 400, "The request is not valid", {
          detail: "tx_hash: must be a transaction hash: 0x and 64 hex digits",
          errors: [
            { field: "tx_hash", message: "must be a transaction hash: 0x and 64 hex digits" },
          ],
        }),
      );
    }
    const explanation = await explainPayment(deps, hash.data);
    if (explanation.type === "not_found") {
      return sendProblem(
        response,
        problem("tx_not_found", 404, "The chain does not know this transaction", {
          detail: "It is not mined (yet), or the hash is wrong.",
        }),
      );
    }
    const transfers = explanation.type === "found" ? explanation.transfers : [];
    response.set("cache-control", "no-store").json({
      tx_hash: hash.data,
      explorer_url: explorerTx(config, hash.data),
      pay_to: config.chain.payTo,
      summary:
        explanation.type === "reverted"
          ? "The transaction reverted: it moved no USDC."
          : transfers.length === 0
            ? "The transaction sent no USDC to pay_to."
            : `${transfers.length} USDC transfer(s) to pay_to.`,
      transfers: transfers.map((transfer) => ({
        log_index: transfer.logIndex,
        from: getAddress(transfer.from),
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
    });
  });

  return router;
}
