import type { RequestHandler } from "express";
import type { ServiceMetrics } from "../../metrics/serviceMetrics.ts";
import { routePattern } from "./routePattern.ts";

/** Counts and times every request, labelled by route pattern (never the raw path). */
export function httpMetrics(metrics: ServiceMetrics): RequestHandler {
  return (request, response, next) => {
    const stopTimer = metrics.httpDuration.startTimer();
    response.once("close", () => {
      const labels = {
        method: request.method,
        route: routePattern(request),
        status: String(response.statusCode),
      };
      stopTimer(labels);
      metrics.httpRequests.inc(labels);
    });
    next();
  };
}
