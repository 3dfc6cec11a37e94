import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { ledgerPageView } from "../ledger/ledgerView.ts";
import { sendRefusal } from "./problem.ts";

/** GET /api/ledger (JSON, `ledgerResponse`): completed payouts, newest first. */
export function ledgerRoutes({ core, config }: SurfaceContext): Router {
  const router = Router();
  router.get("/api/ledger", async (request, response) => {
    const result = await core.listLedger(request.query);
    if (result.type !== "page") return sendRefusal(response, result);
    response
      .set("cache-control", "no-cache")
      .json(ledgerPageView(config, result.query, result.page));
  });
  return router;
}
