import compression from "compression";
import express, { type Express, type Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import type { RequestCounts } from "../rateLimits/requestCounts.ts";
import { cors } from "./middleware/cors.ts";
import { dispatchToSurfaces } from "./middleware/dispatchToSurfaces.ts";
import { errorHandler } from "./middleware/errorHandler.ts";
import { answerOptions, notFound } from "./middleware/fallbacks.ts";
import { refuseDeepJson } from "./middleware/jsonDepth.ts";
import { observeRequests } from "./middleware/observeRequests.ts";
import { rateLimit } from "./middleware/rateLimit.ts";
import { requireJson } from "./middleware/requireJson.ts";
import { securityHeaders } from "./middleware/securityHeaders.ts";

/**
 * The web app every web surface is mounted in: each router is one surface; this file wires
 * them between the protections every route gets (in order: request id with logging and
 * metrics, security headers, compression, CORS, JSON body, rate limits) and the fallbacks
 * (404/405, errors as problems).
 * `requestCounts`: what the rate limiter counts with (api/rateLimits/requestCounts.ts), on its
 * own pool; required when the rate limits are on.
 */
export function createApp(
  routers: Router[],
  deps: Pick<SurfaceContext, "config" | "logger" | "metrics">,
  options: { requestCounts?: RequestCounts } = {},
): Express {
  const { config, logger } = deps;
  const app = express();
  app.disable("x-powered-by");
  // Answers known ahead carry their own ETag (api/web/prebuiltAnswer.ts); the others are built
  // per request and mostly `no-store`, where hashing each body for an ETag bought nothing.
  app.set("etag", false);
  try {
    app.set("trust proxy", config.trustProxy);
  } catch (error) {
    throw new Error(`TRUST_PROXY is not valid: ${(error as Error).message}`);
  }

  app.use(observeRequests(logger, deps.metrics));
  app.use(securityHeaders({ hsts: config.http.publicUrl.startsWith("https://") }));
  // Text answers (JSON, HTML pages, GraphiQL, metrics) above 1 kB, for clients that accept it.
  // No response carries a secret a reflected input could be compared with (BREACH): no
  // cookies, no CSRF tokens. A request that accepts no encoding is not wrapped at all (the
  // wrapping costs every request; such a client gets the body as is either way).
  const compress = compression();
  app.use((request, response, next) => {
    if (request.headers["accept-encoding"]) return compress(request, response, next);
    next();
  });
  app.use(cors());
  app.use(answerOptions(routers));
  app.use(requireJson());
  // strict: false lets any JSON through the parser, so a valid but non-object body gets the
  // precise "must be a JSON object" error instead of "malformed JSON".
  app.use(express.json({ limit: "16kb", strict: false, verify: refuseDeepJson }));
  // After the parser: a GraphQL POST is a read or a write by what its body asks for.
  if (config.rateLimits.enabled && !options.requestCounts) {
    throw new Error("the rate limits are on (RATE_LIMIT_ENABLED) but nothing counts requests");
  }
  app.use(rateLimit({ config, logger, counts: options.requestCounts as RequestCounts }));

  app.use(dispatchToSurfaces(routers));

  app.use(notFound(routers));
  app.use(errorHandler(logger));
  return app;
}
