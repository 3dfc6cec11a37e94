import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";

/** GET /api/info: the offer document. */
export function offerRoutes({ core }: SurfaceContext): Router {
  const router = Router();
  router.get("/api/info", (_request, response) => {
    response.set("cache-control", "public, max-age=60").json(core.offer);
  });
  return router;
}
