import type { Request, RequestHandler } from "express";
import type { ServiceConfig } from "../../config.ts";
import type { Database } from "../../db/connect.ts";
import type { Logger } from "../../logger.ts";
import { BatchedRateCounter } from "../../rateLimits/batchedCounter.ts";
import { pruneRateLimits, type WindowCount } from "../../rateLimits/rateLimitCounter.ts";
import { withTimeout } from "../../withTimeout.ts";
import { problem, sendProblem } from "../problem.ts";
import { clientAddress } from "./clientAddress.ts";

/** How long a request waits for its count before it is let through uncounted. */
const COUNT_TIMEOUT_MS = 1_000;
/** After a count failed, requests go through uncounted this long before the next try. */
const PAUSE_AFTER_FAILURE_MS = 5_000;

/** POSTs that change nothing: counted with the reads. */
const READ_ONLY_POSTS = /^\/api\/receipts\/verify\/?$/i;
const GRAPHQL = /^\/graphql\/?$/i;

export type RouteClass = "read" | "write";

/**
 * Writes are everything but GET/HEAD, the read-only POSTs and GraphQL queries: creating and
 * paying claims by REST, x402, GraphQL mutations or any other surface. Needs the parsed body
 * (a GraphQL POST is a write when it holds a mutation; any mention of the word counts, which
 * errs on the strict side).
 */
export function routeClass(request: Request): RouteClass {
  if (request.method === "GET" || request.method === "HEAD") return "read";
  if (request.method === "POST" && READ_ONLY_POSTS.test(request.path)) return "read";
  if (request.method === "POST" && GRAPHQL.test(request.path)) {
    return /\bmutation\b/i.test(JSON.stringify(request.body ?? "")) ? "write" : "read";
  }
  return "write";
}

/**
 * Per-client limits counted in PostgreSQL (api/rateLimits), so they hold across replicas: a
 * fixed window per client address and route class, with increments batched per replica
 * (BatchedRateCounter). Over the limit: 429 with Retry-After.
 * When the count cannot be had in time (the database is down or slow) the request goes
 * through, and so do the next ones for a few seconds: an outage of the counters must not
 * become an outage, or a slowdown, of the service.
 */
export function rateLimit(deps: {
  sql: Database;
  config: Pick<ServiceConfig, "rateLimits">;
  logger: Logger;
}): RequestHandler {
  const { enabled, windowSeconds, reads, writes } = deps.config.rateLimits;
  if (!enabled) return (_request, _response, next) => next();
  let lastPruned = 0;
  let pausedUntil = 0;
  const counter = new BatchedRateCounter(deps.sql, windowSeconds);
  counter.onFlushError = (error) => {
    deps.logger.warn({ err: error }, "rate limit counts not added; those requests went uncounted");
  };

  return async (request, response, next) => {
    if (request.method === "OPTIONS" || Date.now() < pausedUntil) return next();
    const kind = routeClass(request);
    const limit = kind === "write" ? writes : reads;
    let counted: WindowCount;
    try {
      counted = await withTimeout(
        counter.count(`${kind}:${clientAddress(request.ip)}`),
        COUNT_TIMEOUT_MS,
        "counting the request",
      );
    } catch (error) {
      // Not one more second per request, nor a queue of counts, while the database is away.
      pausedUntil = Date.now() + PAUSE_AFTER_FAILURE_MS;
      deps.logger.warn(
        { err: error, paused_ms: PAUSE_AFTER_FAILURE_MS },
        "rate limit not counted; requests go through uncounted for a while",
      );
      return next();
    }

    if (Date.now() - lastPruned > windowSeconds * 1000) {
      lastPruned = Date.now();
      pruneRateLimits(deps.sql, windowSeconds).catch((error: unknown) => {
        deps.logger.warn({ err: error }, "could not prune the rate limit windows");
      });
    }

    if (counted.count <= limit) return next();
    response.setHeader("Retry-After", String(counted.resetSeconds));
    sendProblem(
      response,
      problem("rate_limited", 429, "Too many requests", {
        detail: `At most ${limit} ${kind} requests per ${windowSeconds} s from one client; retry in ${counted.resetSeconds} s.`,
      }),
    );
  };
}
