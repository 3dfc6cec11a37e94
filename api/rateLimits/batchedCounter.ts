import type { Sql } from "../db/connect.ts";
import { countRequest, type WindowCount } from "./rateLimitCounter.ts";

interface Known {
  /** The window's count in PostgreSQL when last read (all replicas). */
  counted: number;
  /** Requests seen here since, not yet added there. */
  pending: number;
  /** When the window runs out (this process's clock, from the database's reset seconds). */
  endsAt: number;
  flushing: boolean;
}

/**
 * Counts requests in PostgreSQL without a round trip per request: a client's first request in
 * a window is counted there at once (and learns the window); the ones that follow within
 * `flushMs` are counted here and added there in one upsert. A replica's view is the shared
 * count plus its own pending requests, so across N replicas a client can overshoot its limit
 * by at most what N replicas see in `flushMs`. One hot client is one row update per flush,
 * not one per request.
 */
export class BatchedRateCounter {
  private readonly known = new Map<string, Known>();
  private readonly sql: Sql;
  private readonly windowSeconds: number;
  private readonly flushMs: number;
  private timer: NodeJS.Timeout | undefined;
  /** Called when a background flush fails (the counts it carried are lost: requests go through). */
  onFlushError: (error: unknown) => void = () => {};

  constructor(sql: Sql, windowSeconds: number, flushMs = 50) {
    this.sql = sql;
    this.windowSeconds = windowSeconds;
    this.flushMs = flushMs;
  }

  async count(key: string): Promise<WindowCount> {
    const now = Date.now();
    const entry = this.known.get(key);
    if (entry && entry.endsAt > now) {
      entry.pending += 1;
      this.scheduleFlush();
      return {
        count: entry.counted + entry.pending,
        resetSeconds: Math.max(1, Math.ceil((entry.endsAt - now) / 1000)),
      };
    }
    const counted = await countRequest(this.sql, key, this.windowSeconds);
    this.known.set(key, {
      counted: counted.count,
      pending: 0,
      endsAt: Date.now() + counted.resetSeconds * 1000,
      flushing: false,
    });
    return counted;
  }

  private scheduleFlush(): void {
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.flushMs);
    this.timer.unref();
  }

  private async flush(): Promise<void> {
    const now = Date.now();
    for (const [key, entry] of this.known) {
      if (entry.endsAt <= now && entry.pending === 0) this.known.delete(key);
    }
    const due = [...this.known].filter(([, entry]) => entry.pending > 0 && !entry.flushing);
    await Promise.all(
      due.map(async ([key, entry]) => {
        const requests = entry.pending;
        entry.pending = 0;
        entry.flushing = true;
        try {
          const counted = await countRequest(this.sql, key, this.windowSeconds, requests);
          entry.counted = counted.count;
          entry.endsAt = Date.now() + counted.resetSeconds * 1000;
        } catch (error) {
          this.onFlushError(error);
        } finally {
          entry.flushing = false;
        }
      }),
    );
    if ([...this.known.values()].some((entry) => entry.pending > 0)) this.scheduleFlush();
  }
}
