import { Router } from "express";
import { checkHealth, serviceHealthDependencies } from "../health/checkHealth.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";

/** GET /api/health: 200 ok or degraded (with reasons), 503 down. Served for every role. */
export function healthRoutes(deps: ServiceDeps): Router {
  const router = Router();
  router.get("/api/health", async (_request, response) => {
    const report = await checkHealth(serviceHealthDependencies(deps));
    response
      .status(report.status === "down" ? 503 : 200)
      .set("cache-control", "no-store")
      .json(report);
  });
  return router;
}
