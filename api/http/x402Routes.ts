import { encodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { Router } from "express";
import { paidAnswerView, pendingAnswerView, withWebhookSecret } from "../claims/earnAnswerView.ts";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { x402Details } from "../offer/buildOffer.ts";
import { paymentRefusalWords } from "../reasons/refusal.ts";
import {
  type PrebuiltAnswer,
  prebuildAnswer,
  prebuildJson,
  sendPrebuilt,
} from "../web/prebuiltAnswer.ts";
import { problemFor, sendRefusal } from "../web/problem.ts";

// The unpaid 402 is identical for every request: built once per terms object.
const unpaidAnswers = new WeakMap<PaymentRequired, PrebuiltAnswer>();

/**
 * A 402: the x402 terms in the PAYMENT-REQUIRED header (what clients read) and in the body too,
 * as an RFC 9457 problem.
 */
function build402(
  paymentRequired: PaymentRequired,
  fields: { code: "payment_required" | "payment_refused"; detail: string; reason?: string },
): PrebuiltAnswer {
  return prebuildAnswer({
    status: 402,
    body: JSON.stringify(
      problemFor(fields.code, {
        detail: fields.detail,
        ...(fields.reason ? { reason: fields.reason } : {}),
        ...paymentRequired,
      }),
    ),
    contentType: "application/problem+json; charset=utf-8",
    cacheControl: "no-store",
    headers: { "PAYMENT-REQUIRED": encodePaymentRequiredHeader(paymentRequired) },
  });
}

/** x402 over HTTP (the `PAYMENT-*` headers): GET the details, POST to pay and earn. */
export function x402Routes({ core, config }: SurfaceContext): Router {
  const router = Router();
  const details = x402Details(config);
  const unpaidDetail =
    `Pay ${details.amount_usdc} USDC with x402 v2 (scheme exact, ${details.network}) to ` +
    `${details.pay_to}: sign the authorization in the PAYMENT-REQUIRED header and repeat ` +
    `this request with PAYMENT-SIGNATURE. ${details.spend_cap}`;

  const detailsAnswer = prebuildJson(details, "public, max-age=60");
  router.get("/api/x402/earn", (request, response) =>
    sendPrebuilt(request, response, detailsAnswer),
  );

  router.post("/api/x402/earn", async (request, response) => {
    const result = await core.earnWithX402(request.body, request.get("payment-signature"));
    switch (result.type) {
      case "payment_required": {
        let answer = unpaidAnswers.get(result.paymentRequired);
        if (!answer) {
          answer = build402(result.paymentRequired, {
            code: "payment_required",
            detail: unpaidDetail,
          });
          unpaidAnswers.set(result.paymentRequired, answer);
        }
        return sendPrebuilt(request, response, answer);
      }
      case "payment_refused":
        return sendPrebuilt(
          request,
          response,
          build402(result.paymentRequired, {
            code: "payment_refused",
            detail: paymentRefusalWords(result.reason),
            reason: result.reason,
          }),
        );
      case "settlement_unknown":
        return response
          .status(202)
          .json(withWebhookSecret(pendingAnswerView(config, result.claim), result.webhookSecret));
      case "paid": {
        if (result.paymentResponse) response.set("payment-response", result.paymentResponse);
        return response
          .status(200)
          .json(
            withWebhookSecret(
              paidAnswerView(config, result.claim, result.receipt),
              result.webhookSecret,
            ),
          );
      }
      default:
        return sendRefusal(response, result);
    }
  });

  return router;
}
