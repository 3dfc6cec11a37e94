import type { Sql } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { BatchedRateCounter } from "./batchedCounter.ts";
import { pruneRateLimits, type WindowCount } from "./rateLimitCounter.ts";

/**
 * The request counts the HTTP rate limiter holds clients to, on the rate limiter's own pool
 * (api/db/servicePools.ts): built by the composition root, so the HTTP surface gets counts,
 * never a database.
 */
export interface RequestCounts {
  /** Counts one request of `key` in its window (batched: BatchedRateCounter). */
  count(key: string): Promise<WindowCount>;
  /** Deletes the windows that have ended; how many. */
  prune(): Promise<number>;
}

export function requestCounts(sql: Sql, windowSeconds: number, logger: Logger): RequestCounts {
  const counter = new BatchedRateCounter(sql, windowSeconds);
  counter.onFlushError = (error) => {
    logger.warn({ err: error }, "rate limit counts not added yet; kept to add later");
  };
  return {
    count: (key) => counter.count(key),
    prune: () => pruneRateLimits(sql, windowSeconds),
  };
}
