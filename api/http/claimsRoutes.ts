import { type Response, Router } from "express";
import type { AttachOutcome } from "../claims/attachTx.ts";
import { attachTx } from "../claims/attachTx.ts";
import { CLAIM_ID_PATTERN } from "../claims/claimIds.ts";
import { createClaim } from "../claims/createClaim.ts";
import { readClaim, readReceipt } from "../claims/readClaim.ts";
import { attachTxRequest, createClaimRequest } from "../schemas/inputs.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { claimLinks, claimView } from "./claimResponses.ts";
import { type Problem, problem, sendProblem } from "./problem.ts";
import { validate } from "./validate.ts";

function claimNotFound(response: Response, claimId: string) {
  sendProblem(
    response,
    problem("claim_not_found", 404, "No such claim", { detail: `There is no claim ${claimId}.` }),
  );
}

/** Refusals of attaching a tx hash (and of creating a claim with one), as problems. */
export function attachRefusalProblem(
  outcome: Exclude<AttachOutcome, { type: "attached" }>,
): Problem {
  switch (outcome.type) {
    case "claim_not_found":
      return problem("claim_not_found", 404, "No such claim");
    case "claim_expired":
      return problem("claim_expired", 410, "The claim has expired", {
        detail: "Unpaid claims expire after their lifetime. Create a new claim.",
      });
    case "claim_not_open":
      return problem("claim_not_open", 409, "The claim is no longer awaiting payment", {
        detail: `The claim is ${outcome.status}; a transaction can only be attached while it awaits payment.`,
        claim_status: outcome.status,
      });
    case "tx_already_used":
      return problem("tx_already_used", 409, "The transaction is already used by another claim", {
        detail: "A transfer pays at most one claim; this one is named by, or has paid, another.",
      });
    case "tx_not_qualifying":
      return problem(
        "tx_not_qualifying",
        422,
        "The transaction does not qualify as this claim's payment",
        {
          detail: NOT_QUALIFYING[outcome.reason],
          reason: outcome.reason,
        },
      );
  }
}

const NOT_QUALIFYING: Record<
  Extract<AttachOutcome, { type: "tx_not_qualifying" }>["reason"],
  string
> = {
  tx_reverted: "The transaction reverted; it moved no USDC.",
  no_transfer_to_pay_to: "The transaction has no USDC transfer to pay_to.",
  below_price: "The transfer is below the price of 10 USDC; it earns nothing and is not refunded.",
  not_amount_due_nor_from_payout_address:
    "The transfer neither equals the claim's amount_due nor comes from its payout address.",
};

export function claimsRoutes(deps: ServiceDeps): Router {
  const router = Router();
  const { config, sql } = deps;

  router.post("/api/claims", async (request, response) => {
    const input = validate(createClaimRequest, request.body);
    if (!input.ok) return sendProblem(response, input.problem);
    const outcome = await createClaim(deps, {
      flow: "claim",
      payoutAddress: input.value.payout_address,
      txHash: input.value.tx_hash,
      email: input.value.email,
      agentName: input.value.agent_name,
    });
    if (outcome.type === "invalid_payout_address") {
      return sendProblem(
        response,
        problem("invalid_request", 400, "The request is not valid", {
          detail: `payout_address: ${outcome.detail}`,
          errors: [{ field: "payout_address", message: outcome.detail }],
        }),
      );
    }
    if (outcome.type === "amount_space_exhausted") {
      response.set("retry-after", "60");
      return sendProblem(
        response,
        problem("amount_space_exhausted", 503, "No unique amount is free right now", {
          detail: "Try again later.",
        }),
      );
    }
    if (outcome.type !== "created") return sendProblem(response, attachRefusalProblem(outcome));
    const claim = await readClaim(sql, outcome.claimId);
    if (!claim) throw new Error(`Claim ${outcome.claimId} vanished after creation`);
    const body = claimView(config, claim);
    response
      .status(201)
      .location(body.status_url)
      .json({ ...body, amount: body.payment_instructions?.amount_usdc ?? body.amount_due_usdc });
  });

  router.get("/api/claims/:claimId", async (request, response) => {
    const { claimId } = request.params;
    const claim = CLAIM_ID_PATTERN.test(claimId) ? await readClaim(sql, claimId) : null;
    if (!claim) return claimNotFound(response, claimId);
    response.set("cache-control", "no-store").json(claimView(config, claim));
  });

  router.post("/api/claims/:claimId/tx", async (request, response) => {
    const { claimId } = request.params;
    if (!CLAIM_ID_PATTERN.test(claimId)) return claimNotFound(response, claimId);
    const input = validate(attachTxRequest, request.body);
    if (!input.ok) return sendProblem(response, input.problem);
    const outcome = await attachTx(deps, claimId, input.value.tx_hash);
    if (outcome.type !== "attached") return sendProblem(response, attachRefusalProblem(outcome));
    const claim = await readClaim(sql, claimId);
    if (!claim) return claimNotFound(response, claimId);
    response.status(outcome.state === "not_mined_yet" ? 202 : 200).json({
      ...claimView(config, claim),
      attached_tx: { tx_hash: input.value.tx_hash, state: outcome.state },
    });
  });

  router.get("/api/claims/:claimId/receipt", async (request, response) => {
    const { claimId } = request.params;
    const claim = CLAIM_ID_PATTERN.test(claimId) ? await readClaim(sql, claimId) : null;
    if (!claim) return claimNotFound(response, claimId);
    const receipt = claim.status === "completed" ? await readReceipt(sql, claimId) : null;
    if (!receipt) {
      return sendProblem(
        response,
        problem("receipt_not_ready", 409, "The receipt is not ready", {
          detail:
            claim.status === "failed" || claim.status === "expired"
              ? `The claim is ${claim.status}; it will not get a receipt.`
              : `The claim is ${claim.status}; the receipt exists once it is completed.`,
          claim_status: claim.status,
          status_url: claimLinks(config, claimId).status_url,
        }),
      );
    }
    response.json({
      claim_id: receipt.claimId,
      message: receipt.message,
      signature: receipt.signature,
      signer: receipt.signer,
      issued_at: receipt.issuedAt.toISOString(),
      verify_url: `${config.http.publicUrl}/api/receipts/verify`,
    });
  });

  return router;
}
