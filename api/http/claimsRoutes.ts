import { Router } from "express";
import { claimView } from "../claims/claimView.ts";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { claimClient } from "../rateLimits/clientAddress.ts";
import { receiptView } from "../receipts/receiptView.ts";
import { sendPrebuilt } from "../web/prebuiltAnswer.ts";
import { sendRefusal } from "../web/problem.ts";
import { claimAnswers } from "./claimAnswers.ts";

/** The claim flow over REST: create, read, attach a tx hash, fetch the receipt. */
export function claimsRoutes({ core, config }: SurfaceContext): Router {
  const router = Router();
  const verifyUrl = `${config.http.publicUrl}/api/receipts/verify`;
  const claimAnswer = claimAnswers(config);

  router.post("/api/claims", async (request, response) => {
    const result = await core.createClaim(request.body, { client: claimClient(request.ip) });
    if (result.type !== "created") return sendRefusal(response, result);
    const body = claimView(config, result.claim);
    response
      .status(result.reused ? 200 : 201)
      .location(body.status_url)
      .json({
        ...body,
        amount: body.payment_instructions?.amount_usdc ?? body.amount_due_usdc,
        ...(result.webhookSecret ? { webhook_secret: result.webhookSecret } : {}),
      });
  });

  router.get("/api/claims/:claimId", async (request, response) => {
    const result = await core.getClaim(request.params.claimId);
    if (result.type !== "claim") return sendRefusal(response, result);
    sendPrebuilt(request, response, claimAnswer(result.claim));
  });

  router.post("/api/claims/:claimId/tx", async (request, response) => {
    const result = await core.attachTx(request.params.claimId, request.body);
    if (result.type !== "attached") return sendRefusal(response, result);
    response.status(result.state === "not_mined_yet" ? 202 : 200).json({
      ...claimView(config, result.claim),
      attached_tx: { tx_hash: result.txHash, state: result.state, signed: result.signed },
    });
  });

  router.get("/api/claims/:claimId/receipt", async (request, response) => {
    const result = await core.getReceipt(request.params.claimId);
    if (result.type !== "receipt") return sendRefusal(response, result);
    response.json(receiptView(result.receipt, verifyUrl));
  });

  return router;
}
