import { createHash, timingSafeEqual } from "node:crypto";
import { Router } from "express";
import { serviceMetrics } from "../metrics/serviceMetrics.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { problem, sendProblem } from "./problem.ts";

/**
 * GET /metrics, Prometheus text, for every role. Public by default (it holds counts and
 * balances that are on chain anyway, no secrets); with METRICS_TOKEN set it wants
 * `Authorization: Bearer <token>`.
 */
export function metricsRoutes(deps: ServiceDeps): Router {
  const router = Router();
  const metrics = serviceMetrics(deps);
  const token = deps.config.metrics.token;

  router.get("/metrics", async (request, response) => {
    if (token && !bearerMatches(request.get("authorization"), token)) {
      response.setHeader("WWW-Authenticate", 'Bearer realm="metrics"');
      return sendProblem(
        response,
        problem("unauthorized", 401, "Authorization required", {
          detail: "GET /metrics wants Authorization: Bearer <METRICS_TOKEN>.",
        }),
      );
    }
    const text = await metrics.render();
    response.status(200).set("cache-control", "no-store").type(metrics.contentType).send(text);
  });
  return router;
}

/** Compares digests, so the time taken says nothing about how much of the token matched. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  if (!match?.[1]) return false;
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(match[1]), digest(token));
}
