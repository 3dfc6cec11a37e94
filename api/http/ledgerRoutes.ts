import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { ledgerPageView } from "../ledger/ledgerView.ts";
import type { LedgerPage } from "../ledger/listLedgerEntries.ts";
import { type PrebuiltAnswer, prebuildJson, sendPrebuilt } from "../web/prebuiltAnswer.ts";
import { sendRefusal } from "../web/problem.ts";

/** GET /api/ledger (JSON, `ledgerResponse`): completed payouts, newest first. */
export function ledgerRoutes({ core, config }: SurfaceContext): Router {
  const router = Router();
  // The unfiltered first page is one shared object until a claim completes
  // (api/ledger/cachedFirstPages.ts): its answer is built, serialised and hashed once too.
  // Any other page is a new object, read and answered once.
  const answers = new WeakMap<LedgerPage, PrebuiltAnswer>();
  router.get("/api/ledger", async (request, response) => {
    const result = await core.listLedger(request.query);
    if (result.type !== "page") return sendRefusal(response, result);
    let answer = answers.get(result.page);
    if (!answer) {
      answer = prebuildJson(ledgerPageView(config, result.query, result.page), "no-cache");
      answers.set(result.page, answer);
    }
    sendPrebuilt(request, response, answer);
  });
  return router;
}
