import { createHash, timingSafeEqual } from "node:crypto";
import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { problemFor, sendProblem } from "../web/problem.ts";

/**
 * GET /metrics, Prometheus text, for every role. With METRICS_TOKEN set it wants
 * `Authorization: Bearer <token>`; the configuration requires one when PUBLIC_URL is https, so
 * a deployment on the internet never shows its backlogs, balances and traffic to anyone. Open
 * only on a plain-http (local) deployment.
 */
export function metricsRoutes({ config, metrics }: SurfaceContext): Router {
  const router = Router();
  const token = config.metrics.token;

  router.get("/metrics", async (request, response) => {
    if (token && !bearerMatches(request.get("authorization"), token)) {
      response.setHeader("WWW-Authenticate", 'Bearer realm="metrics"');
      return sendProblem(
        response,
        problemFor("unauthorized", {
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
