import compression from "compression";
import express, { type Express, type Router } from "express";
import type { Database } from "../db/connect.ts";
import { type MetricsDeps, serviceMetrics } from "../metrics/serviceMetrics.ts";
import { cors } from "./middleware/cors.ts";
import { errorHandler } from "./middleware/errorHandler.ts";
import { answerOptions, notFound } from "./middleware/fallbacks.ts";
import { httpMetrics } from "./middleware/httpMetrics.ts";
import { rateLimit } from "./middleware/rateLimit.ts";
import { requestId } from "./middleware/requestId.ts";
import { requestLog } from "./middleware/requestLog.ts";
import { requireJson } from "./middleware/requireJson.ts";
import { securityHeaders } from "./middleware/securityHeaders.ts";

/**
 * The HTTP surface: each router is one surface; this file wires them between the protections
 * every route gets (in order: request id, security headers, logging and metrics, compression,
 * CORS, JSON body, rate limits) and the fallbacks (404/405, errors as problems).
 * `rateLimitSql`: the rate limiter's own pool (api/db/servicePools.ts), the app's `sql` if unset.
 */
export function createApp(
  routers: Router[],
  deps: MetricsDeps,
  options: { rateLimitSql?: Database } = {},
): Express {
  const { config, logger } = deps;
  const app = express();
  app.disable("x-powered-by");
  try {
    app.set("trust proxy", config.trustProxy);
  } catch (error) {
    throw new Error(`TRUST_PROXY is not valid: ${(error as Error).message}`);
  }

  app.use(requestId());
  app.use(securityHeaders({ hsts: config.http.publicUrl.startsWith("https://") }));
  app.use(requestLog(logger));
  app.use(httpMetrics(serviceMetrics(deps)));
  // Text answers (JSON, HTML pages, GraphiQL, metrics) above 1 kB, for clients that accept it.
  // No response carries a secret a reflected input could be compared with (BREACH): no
  // cookies, no CSRF tokens.
  app.use(compression());
  app.use(cors());
  app.use(answerOptions(app));
  app.use(requireJson());
  // strict: false lets any JSON through the parser, so a valid but non-object body gets the
  // precise "must be a JSON object" error instead of "malformed JSON".
  app.use(express.json({ limit: "16kb", strict: false }));
  // After the parser: a GraphQL POST is a read or a write by what its body asks for.
  app.use(rateLimit({ ...deps, sql: options.rateLimitSql ?? deps.sql }));

  for (const router of routers) app.use(router);

  app.use(notFound(app));
  app.use(errorHandler(logger));
  return app;
}
