import type { Request, Response } from "express";
import { z } from "zod";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { formatUsdcFixed, PRICE_ATOMIC } from "../money.ts";
import { paymentView } from "../payments/paymentView.ts";
import { describeRefusal } from "../reasons/refusal.ts";
import { txHashInput } from "../schemas/inputs.ts";
import { parseInput } from "../schemas/parseInput.ts";
import { answerProblem, sendPage, wantsJson } from "./pageResponses.ts";
import {
  paymentSearchForm,
  renderPaymentPage,
  renderPaymentSearchPage,
} from "./renderPaymentPage.ts";

const paymentSearch = z.object({ tx_hash: txHashInput });

/** "What happened to my payment?": the search (GET /payments) and the answer (GET /payments/{tx_hash}). */
export function paymentPages({ core, config }: SurfaceContext) {
  const serviceName = config.serviceName;

  /** GET /payments?tx_hash=…: to the payment's page, or the search again with the error. */
  function search(request: Request, response: Response) {
    const given = request.query.tx_hash;
    if (given === undefined || given === "") {
      return sendPage(response, renderPaymentSearchPage({ serviceName, value: "" }));
    }
    const input = parseInput(paymentSearch, { tx_hash: given });
    if (input.ok) return response.redirect(303, `/payments/${input.value.tx_hash}`);
    sendPage(
      response,
      renderPaymentSearchPage({
        serviceName,
        value: typeof given === "string" ? given : "",
        error: input.errors.map((error) => error.message).join("; "),
      }),
      { status: 400 },
    );
  }

  /**
   * GET /payments/{tx_hash}: the explanation as a page (or GET /api/payments/{tx_hash}'s JSON for
   * a client that asks for JSON). A hash that is not one names no payment: 404 either way.
   */
  async function explain(request: Request, response: Response) {
    const result = await core.explainPayment(String(request.params.txHash));
    response.vary("Accept");
    if (result.type === "explained") {
      const payment = paymentView(config, result);
      if (wantsJson(request)) return response.set("cache-control", "no-store").json(payment);
      return sendPage(
        response,
        renderPaymentPage({ serviceName, payment, priceUsdc: formatUsdcFixed(PRICE_ATOMIC) }),
      );
    }
    const next = paymentSearchForm("");
    if (result.type === "tx_not_found") {
      const refusal = describeRefusal(result);
      return answerProblem(request, response, serviceName, "tx_not_found", {
        ...(refusal.detail !== undefined ? { detail: refusal.detail } : {}),
        next,
      });
    }
    if (result.type === "temporarily_unavailable") {
      response.setHeader("Retry-After", String(result.retryAfterSeconds));
      return answerProblem(request, response, serviceName, "temporarily_unavailable", {
        detail: describeRefusal(result).detail ?? "",
        next,
      });
    }
    const refusal = describeRefusal(result);
    answerProblem(request, response, serviceName, "not_found", {
      ...(refusal.detail !== undefined ? { detail: refusal.detail } : {}),
      errors: result.errors,
      next,
    });
  }

  return { search, explain };
}
