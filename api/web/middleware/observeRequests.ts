import { randomUUID } from "node:crypto";
import type { RequestHandler, Response } from "express";
import { type Logger, logContext } from "../../logger.ts";
import type { ServiceMetrics } from "../../metrics/serviceMetrics.ts";
import { type RequestLine, requestLineWriter } from "../../requestLines.ts";
import { routePattern } from "./routePattern.ts";

/** What an incoming X-Request-Id may look like to be kept (a load balancer's, a client's). */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Probes are logged at debug: a load balancer or Prometheus asks every few seconds. */
const PROBES = new Set(["/api/health", "/metrics"]);

/**
 * What every request leaves behind, set up in one place (one middleware and one `close`
 * listener per request: these run on every request, so their cost is every route's):
 *
 * - an id: a sane incoming `X-Request-Id`, or a new UUID, echoed in the response header; every
 *   log line written while the request is handled carries it as `request_id` (the logger's
 *   mixin reads `logContext`);
 * - one log line once the response is done (or the client went away), written the cheap way
 *   (api/requestLines.ts);
 * - the request counted and timed in the metrics, labelled by route pattern, never the raw path.
 */
export function observeRequests(logger: Logger, metrics: ServiceMetrics): RequestHandler {
  const writeLine = requestLineWriter(logger);
  return (request, response, next) => {
    const started = performance.now();
    const incoming = request.headers["x-request-id"];
    const id =
      typeof incoming === "string" && ACCEPTED_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    response.locals.requestId = id;
    response.setHeader("X-Request-Id", id);
    response.once("close", () => {
      const seconds = (performance.now() - started) / 1000;
      const route = routePattern(request);
      const status = response.statusCode;
      metrics.requests.record(request.method, route, status, seconds);
      const line: RequestLine = {
        request_id: id,
        method: request.method,
        route,
        path: request.path,
        status,
        duration_ms: Math.round(seconds * 1_000_000) / 1000,
      };
      if (!response.writableFinished) line.aborted = true;
      writeLine(PROBES.has(route) ? "debug" : status >= 500 ? "warn" : "info", line);
    });
    logContext.run({ request_id: id }, next);
  };
}

export function requestIdOf(response: Response): string | undefined {
  return response.locals.requestId as string | undefined;
}
