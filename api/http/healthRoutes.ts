import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { healthView } from "../health/healthView.ts";

/** GET /api/health: 200 ok or degraded (with reasons), 503 down. Served for every role. */
export function healthRoutes({ core }: SurfaceContext): Router {
  const router = Router();
  router.get("/api/health", async (_request, response) => {
    const report = await core.checkHealth();
    response
      .status(report.status === "down" ? 503 : 200)
      .set("cache-control", "no-store")
      .json(healthView(report));
  });
  return router;
}
