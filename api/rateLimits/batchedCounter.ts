import type { Sql } from "../db/connect.ts";
import { withTimeout } from "../withTimeout.ts";
import { countRequests, type WindowCount } from "./rateLimitCounter.ts";

/** A batch not counted by then counts as failed, so that later batches are tried at all. */
const BATCH_TIMEOUT_MS = 5_000;

interface Known {
  /** The window's count in PostgreSQL when last read (all replicas). */
  counted: number;
  /** Requests seen here since, not yet added there. */
  pending: number;
  /**
   * Requests in a batch on its way to PostgreSQL: no longer pending, not yet in `counted`. A
   * request that arrived meanwhile was counted without them, and a client with requests in
   * flight went over its limit by that many (CI caught a fourth write of three answered 201).
   */
  inFlight: number;
  /** When the window runs out (this process's clock, from the database's reset seconds). */
  endsAt: number;
}

interface Waiting {
  requests: number;
  waiters: { resolve: (count: WindowCount) => void; reject: (error: unknown) => void }[];
}

/**
 * Counts requests in PostgreSQL in batches: every `flushMs` at most one statement adds what
 * this replica saw, for every client at once (`countRequests`), so the counter's database sees
 * a few statements a second however many clients come, and a flood of new addresses cannot
 * queue it up. A client's first request in a window waits for the next batch (it learns the
 * window and the shared count); the ones that follow are counted here at once and added with
 * the next batch. A replica's view is the shared count plus its own pending requests, so across
 * N replicas a client can overshoot its limit by at most what N replicas see in `flushMs`.
 */
export class BatchedRateCounter {
  private readonly known = new Map<string, Known>();
  private waiting = new Map<string, Waiting>();
  private readonly sql: Sql;
  private readonly windowSeconds: number;
  private readonly flushMs: number;
  private timer: NodeJS.Timeout | undefined;
  private flushing = false;
  /** Called when a batch fails (its counts stay pending here, for the next batch). */
  onFlushError: (error: unknown) => void = () => {};

  constructor(sql: Sql, windowSeconds: number, flushMs = 50) {
    this.sql = sql;
    this.windowSeconds = windowSeconds;
    this.flushMs = flushMs;
  }

  count(key: string): Promise<WindowCount> {
    const now = Date.now();
    const entry = this.known.get(key);
    if (entry && entry.endsAt > now) {
      entry.pending += 1;
      this.scheduleFlush();
      return Promise.resolve({
        count: entry.counted + entry.inFlight + entry.pending,
        resetSeconds: Math.max(1, Math.ceil((entry.endsAt - now) / 1000)),
      });
    }
    return new Promise((resolve, reject) => {
      const waiting = this.waiting.get(key) ?? { requests: 0, waiters: [] };
      waiting.requests += 1;
      waiting.waiters.push({ resolve, reject });
      this.waiting.set(key, waiting);
      // A first request waits for its count: the batch goes out soon, not a whole flushMs later.
      this.scheduleFlush(Math.min(5, this.flushMs));
    });
  }

  private scheduleFlush(delayMs = this.flushMs): void {
    if (this.timer || this.flushing) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
    this.timer.unref();
  }

  private async flush(): Promise<void> {
    const now = Date.now();
    for (const [key, entry] of this.known) {
      if (entry.endsAt <= now && entry.pending === 0 && entry.inFlight === 0) {
        this.known.delete(key);
      }
    }
    const waiting = this.waiting;
    this.waiting = new Map();
    const batch = new Map<string, number>();
    const pending = new Map<string, number>();
    for (const [key, entry] of this.known) {
      if (entry.pending === 0) continue;
      pending.set(key, entry.pending);
      batch.set(key, entry.pending);
      entry.inFlight += entry.pending;
      entry.pending = 0;
    }
    for (const [key, { requests }] of waiting) batch.set(key, (batch.get(key) ?? 0) + requests);
    if (batch.size === 0) return;

    this.flushing = true;
    let failed = false;
    try {
      const counted = await withTimeout(
        countRequests(this.sql, batch, this.windowSeconds),
        BATCH_TIMEOUT_MS,
        "counting a batch of requests",
      );
      for (const [key, count] of counted) {
        const entry = this.known.get(key);
        this.known.set(key, {
          // The database's count includes this batch's requests: they are in flight no more.
          counted: count.count,
          pending: entry?.pending ?? 0,
          inFlight: (entry?.inFlight ?? 0) - (pending.get(key) ?? 0),
          endsAt: Date.now() + count.resetSeconds * 1000,
        });
        const waiters = waiting.get(key)?.waiters ?? [];
        // The batch added all of them: each waiter gets its own place in the window's count.
        waiters.forEach((waiter, index) => {
          waiter.resolve({
            count: count.count - waiters.length + index + 1,
            resetSeconds: count.resetSeconds,
          });
        });
      }
    } catch (error) {
      failed = true;
      // Counted here still, and added by a later batch: a failure must not give a client its
      // requests back. The first requests that waited are refused their count.
      for (const [key, requests] of pending) {
        const entry = this.known.get(key);
        if (entry) {
          entry.inFlight -= requests;
          entry.pending += requests;
        }
      }
      for (const { waiters } of waiting.values()) {
        for (const waiter of waiters) waiter.reject(error);
      }
      this.onFlushError(error);
    } finally {
      this.flushing = false;
    }
    const more =
      this.waiting.size > 0 || [...this.known.values()].some((entry) => entry.pending > 0);
    // A database that refuses is asked again in a second, not every few milliseconds.
    if (more) this.scheduleFlush(failed ? 1_000 : this.flushMs);
  }
}
