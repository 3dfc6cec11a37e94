import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { paymentView } from "../payments/paymentView.ts";
import { sendRefusal } from "../web/problem.ts";

/** GET /api/payments/{tx_hash}: "what happened to my payment?" */
export function paymentsRoutes({ core, config }: SurfaceContext): Router {
  const router = Router();
  router.get("/api/payments/:txHash", async (request, response) => {
    const result = await core.explainPayment(request.params.txHash);
    if (result.type !== "explained") return sendRefusal(response, result);
    response.set("cache-control", "no-store").json(paymentView(config, result));
  });
  return router;
}
