import type { Request, RequestHandler } from "express";
import type { ServiceConfig } from "../../config/serviceConfig.ts";
import type { Logger } from "../../logger.ts";
import { clientAddress } from "../../rateLimits/clientAddress.ts";
import type { WindowCount } from "../../rateLimits/rateLimitCounter.ts";
import type { RequestCounts } from "../../rateLimits/requestCounts.ts";
import { withTimeout } from "../../withTimeout.ts";
import { problemFor, sendProblem } from "../problem.ts";

/**
 * After a count failed, the counter is left alone this long: reads go through uncounted and
 * writes are refused at once, without a second's wait each.
 */
const PAUSE_AFTER_FAILURE_MS = 5_000;

/** POSTs that change nothing: counted with the reads (the API's receipt check and the page's). */
const READ_ONLY_POSTS = /^\/(?:api\/receipts\/verify|verify)\/?$/i;
const GRAPHQL = /^\/graphql\/?$/i;
const AGENT_ENDPOINTS = /^\/(mcp|a2a)\/?$/i;
/** MCP tools and A2A methods that create claims or pay (or cancel): writes; the rest reads. */
const AGENT_WRITE_TOOLS = new Set(["create_claim", "attach_payment_tx", "earn_with_x402"]);
const AGENT_WRITE_METHODS = new Set([
  "SendMessage",
  "SendStreamingMessage",
  "CancelTask",
  "message/send",
  "message/stream",
  "tasks/cancel",
]);

/** A JSON-RPC call (or batch) to /mcp or /a2a that writes; unreadable ones count as writes. */
function isAgentWrite(body: unknown): boolean {
  const calls = Array.isArray(body) ? body : [body];
  return calls.some((call) => {
    if (!call || typeof call !== "object") return true;
    const { method, params } = call as { method?: unknown; params?: { name?: unknown } };
    if (method === "tools/call") return AGENT_WRITE_TOOLS.has(String(params?.name));
    return typeof method === "string" && AGENT_WRITE_METHODS.has(method);
  });
}

/** The forms that create claims, counted by IPv6 /48 rather than /64 (see clientAddress). */
const CLAIM_CREATION = /^\/(?:api\/)?claims\/?$/i;

/**
 * Requests that may open claims: the claim forms and the agents' writes. An IPv6 client is
 * counted for these by its /48, so a rented /48's 65,536 /64s share one limit.
 */
function createsClaims(request: Request): boolean {
  if (request.method !== "POST") return false;
  return CLAIM_CREATION.test(request.path) || AGENT_ENDPOINTS.test(request.path);
}

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
  if (request.method === "POST" && AGENT_ENDPOINTS.test(request.path)) {
    return isAgentWrite(request.body) ? "write" : "read";
  }
  return "write";
}

/**
 * Per-client limits counted in PostgreSQL (api/rateLimits), so they hold across replicas: a
 * fixed window per client address and route class, with increments batched per replica
 * (BatchedRateCounter). Over the limit: 429 with Retry-After.
 * When the count cannot be had in time (the rate limiter's database is down or slow), reads go
 * through uncounted but writes are refused (503 `temporarily_unavailable`, Retry-After) for a
 * few seconds: uncounted writes would let anyone create claims, or hold connections, without
 * limit exactly while the database is struggling; reads are cheap and must stay up.
 */
export function rateLimit(deps: {
  counts: RequestCounts;
  config: Pick<ServiceConfig, "rateLimits">;
  logger: Logger;
}): RequestHandler {
  // countTimeoutMs: how long a request waits for its count (RATE_LIMIT_COUNT_TIMEOUT_MS). The
  // limiter's own pool answers in a millisecond or two when the database is well; a read must
  // still be answered within a second when it is not.
  const { enabled, windowSeconds, reads, writes, countTimeoutMs } = deps.config.rateLimits;
  if (!enabled) return (_request, _response, next) => next();
  let lastPruned = 0;
  let pausedUntil = 0;
  const counter = deps.counts;
  const uncounted: RequestHandler = (request, response, next) => {
    if (routeClass(request) === "read") return next();
    const retryAfter = Math.max(1, Math.ceil((pausedUntil - Date.now()) / 1000));
    response.setHeader("Retry-After", String(retryAfter));
    sendProblem(
      response,
      problemFor("temporarily_unavailable", {
        detail: `Requests that change something cannot be counted against the rate limits right now, so they are refused; reads still work. Retry in ${retryAfter} s.`,
      }),
    );
  };

  return async (request, response, next) => {
    if (request.method === "OPTIONS") return next();
    // Not one more second per request, nor a queue of counts, while the database is away.
    if (Date.now() < pausedUntil) return uncounted(request, response, next);
    const kind = routeClass(request);
    const limit = kind === "write" ? writes : reads;
    let counted: WindowCount;
    try {
      counted = await withTimeout(
        counter.count(
          `${kind}:${clientAddress(request.ip, kind === "read" || createsClaims(request) ? 48 : 64)}`,
        ),
        countTimeoutMs,
        "counting the request",
      );
    } catch (error) {
      pausedUntil = Date.now() + PAUSE_AFTER_FAILURE_MS;
      deps.logger.warn(
        { err: error, paused_ms: PAUSE_AFTER_FAILURE_MS },
        "rate limit not counted; writes are refused and reads go through uncounted for a while",
      );
      return uncounted(request, response, next);
    }

    if (Date.now() - lastPruned > windowSeconds * 1000) {
      lastPruned = Date.now();
      counter.prune().catch((error: unknown) => {
        deps.logger.warn({ err: error }, "could not prune the rate limit windows");
      });
    }

    if (counted.count <= limit) return next();
    response.setHeader("Retry-After", String(counted.resetSeconds));
    sendProblem(
      response,
      problemFor("rate_limited", {
        detail: `At most ${limit} ${kind} requests per ${windowSeconds} s from one client; retry in ${counted.resetSeconds} s.`,
      }),
    );
  };
}
