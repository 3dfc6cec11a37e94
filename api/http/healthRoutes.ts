import { Router } from "express";
import type { HealthReport } from "../health/checkHealth.ts";

export function healthRoutes(checkHealth: () => Promise<HealthReport>): Router {
  const router = Router();
  router.get("/api/health", async (_request, response) => {
    const report = await checkHealth();
    response
      .status(report.status === "down" ? 503 : 200)
      .set("cache-control", "no-store")
      .json(report);
  });
  return router;
}
