import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { prebuildJson, sendPrebuilt } from "../web/prebuiltAnswer.ts";

/** GET /api/info: the offer document. */
export function offerRoutes({ core }: SurfaceContext): Router {
  const router = Router();
  // The offer is built once per process from the configuration: so is its answer.
  const offer = prebuildJson(core.offer, "public, max-age=60");
  router.get("/api/info", (request, response) => sendPrebuilt(request, response, offer));
  return router;
}
