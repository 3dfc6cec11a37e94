import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { receiptVerdictView } from "../receipts/receiptView.ts";
import { sendRefusal } from "../web/problem.ts";

/** POST /api/receipts/verify: is a receipt ours, and the one on record? */
export function receiptsRoutes({ core }: SurfaceContext): Router {
  const router = Router();
  router.post("/api/receipts/verify", async (request, response) => {
    const result = await core.verifyReceipt(request.body);
    if (result.type !== "verdict") return sendRefusal(response, result);
    response.json(receiptVerdictView(result.verdict));
  });
  return router;
}
