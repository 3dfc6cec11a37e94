import { encodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { type Response, Router } from "express";
import { readClaim, readReceipt } from "../claims/readClaim.ts";
import { x402Details } from "../offer/buildOffer.ts";
import { x402EarnRequest } from "../schemas/inputs.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { earnWithX402, type X402Deps } from "../x402/earnWithX402.ts";
import { createFacilitator } from "../x402/facilitator.ts";
import { refusalCode, refusalWords } from "../x402/refusalReasons.ts";
import { prepareX402Terms, type X402Terms } from "../x402/x402Terms.ts";
import { claimLinks, claimView } from "./claimResponses.ts";
import { problem, sendProblem } from "./problem.ts";
import { validate } from "./validate.ts";

interface Encoded402 {
  header: string;
  body: string;
}

// The unpaid 402 is identical for every request: encode it once per terms object.
const encodedUnpaid = new WeakMap<PaymentRequired, Encoded402>();

function encode402(
  paymentRequired: PaymentRequired,
  fields: { code: string; title: string; detail: string; reason?: string },
): Encoded402 {
  return {
    header: encodePaymentRequiredHeader(paymentRequired),
    body: JSON.stringify(
      problem(fields.code, 402, fields.title, {
        detail: fields.detail,
        ...(fields.reason ? { reason: fields.reason } : {}),
        ...paymentRequired,
      }),
    ),
  };
}

/** The x402 terms in the body too, as an RFC 9457 problem (the header is what clients read). */
function send402(response: Response, encoded: Encoded402) {
  response
    .status(402)
    .set("payment-required", encoded.header)
    .set("cache-control", "no-store")
    .type("application/problem+json")
    .send(encoded.body);
}

export function x402Routes(deps: ServiceDeps): Router {
  const router = Router();
  const { config } = deps;
  const facilitator = createFacilitator(config);
  // Built on first use and kept; a failure (facilitator down) is retried on the next request.
  let terms: Promise<X402Terms> | undefined;
  const x402: X402Deps | null = facilitator
    ? {
        ...deps,
        facilitator,
        terms: () => {
          terms ??= prepareX402Terms(config, facilitator.client).catch((error: unknown) => {
            terms = undefined;
            throw error;
          });
          return terms;
        },
      }
    : null;
  const details = x402Details(config);

  router.get("/api/x402/earn", (_request, response) => {
    response.set("cache-control", "public, max-age=60").json(details);
  });

  router.post("/api/x402/earn", async (request, response) => {
    const input = validate(x402EarnRequest, request.body);
    if (!input.ok) return sendProblem(response, input.problem);
    if (!x402) {
      return sendProblem(
        response,
        problem("x402_disabled", 503, "x402 payments are switched off on this deployment", {
          detail: "Pay with a claim instead: POST /api/claims.",
        }),
      );
    }
    const outcome = await earnWithX402(x402, {
      payoutAddress: input.value.payout_address,
      agentName: input.value.agent_name,
      email: input.value.email,
      paymentHeader: request.get("payment-signature"),
    });

    switch (outcome.type) {
      case "payment_required": {
        let encoded = encodedUnpaid.get(outcome.paymentRequired);
        if (!encoded) {
          encoded = encode402(outcome.paymentRequired, {
            code: "payment_required",
            title: "Payment required",
            detail:
              `Pay ${details.amount_usdc} USDC with x402 v2 (scheme exact, ${details.network}) to ` +
              `${details.pay_to}: sign the authorization in the PAYMENT-REQUIRED header and repeat ` +
              `this request with PAYMENT-SIGNATURE. ${details.spend_cap}`,
          });
          encodedUnpaid.set(outcome.paymentRequired, encoded);
        }
        return send402(response, encoded);
      }
      case "payment_refused": {
        const code = refusalCode(outcome.reason);
        return send402(
          response,
          encode402(outcome.paymentRequired, {
            code: "payment_refused",
            title: "The payment was refused",
            detail: `${refusalWords(code)} No claim was opened and nothing was paid out.`,
            reason: code,
          }),
        );
      }
      case "invalid_payout_address":
        return sendProblem(
          response,
          problem("invalid_request", 400, "The request is not valid", {
            detail: `payout_address: ${outcome.detail}`,
            errors: [{ field: "payout_address", message: outcome.detail }],
          }),
        );
      case "facilitator_unavailable":
        response.set("retry-after", "5");
        return sendProblem(
          response,
          problem("facilitator_unavailable", 503, "The payment facilitator is unavailable", {
            detail: `${outcome.detail} Nothing was charged; try again shortly.`,
          }),
        );
      case "settlement_unknown": {
        const links = claimLinks(config, outcome.claimId);
        return response.status(202).json({
          claim_id: outcome.claimId,
          status: "awaiting_payment",
          ...links,
          detail:
            "The settlement's outcome is not known yet. Nothing will be charged twice: poll " +
            "status_url; the claim completes when the payment appears on chain.",
        });
      }
      case "paid": {
        const [claim, receipt] = await Promise.all([
          readClaim(deps.sql, outcome.claimId),
          readReceipt(deps.sql, outcome.claimId),
        ]);
        if (!claim) throw new Error(`x402 claim ${outcome.claimId} vanished`);
        if (outcome.paymentResponse) response.set("payment-response", outcome.paymentResponse);
        const view = claimView(config, claim);
        return response.status(200).json({
          claim_id: claim.id,
          status: claim.status,
          payout_tx: claim.payoutTx,
          receipt: receipt
            ? {
                message: receipt.message,
                signature: receipt.signature,
                signer: receipt.signer,
                issued_at: receipt.issuedAt.toISOString(),
              }
            : null,
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
        });
      }
    }
  });

  return router;
}
