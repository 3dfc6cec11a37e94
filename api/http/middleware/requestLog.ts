import type { RequestHandler } from "express";
import type { Logger } from "../../logger.ts";
import { requestIdOf } from "./requestId.ts";
import { routePattern } from "./routePattern.ts";

/** Probes are logged at debug: a load balancer or Prometheus asks every few seconds. */
const PROBES = new Set(["/api/health", "/metrics"]);

/** One log line per request once its response is done (or the client went away). */
export function requestLog(logger: Logger): RequestHandler {
  return (request, response, next) => {
    const started = process.hrtime.bigint();
    response.once("close", () => {
      const route = routePattern(request);
      const status = response.statusCode;
      const line = {
        request_id: requestIdOf(response),
        method: request.method,
        route,
        path: request.path,
        status,
        duration_ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        ...(response.writableFinished ? {} : { aborted: true }),
      };
      if (PROBES.has(route)) logger.debug(line, "request");
      else if (status >= 500) logger.warn(line, "request");
      else logger.info(line, "request");
    });
    next();
  };
}
