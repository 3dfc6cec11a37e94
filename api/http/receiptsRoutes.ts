import { Router } from "express";
import { verifyReceipt } from "../receipts/verifyReceipt.ts";
import { verifyReceiptRequest } from "../schemas/inputs.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { sendProblem } from "./problem.ts";
import { validate } from "./validate.ts";

export function receiptsRoutes(deps: ServiceDeps): Router {
  const router = Router();
  router.post("/api/receipts/verify", async (request, response) => {
    const input = validate(verifyReceiptRequest, request.body);
    if (!input.ok) return sendProblem(response, input.problem);
    response.json(await verifyReceipt(deps.sql, deps.config.receipts.signer, input.value));
  });
  return router;
}
