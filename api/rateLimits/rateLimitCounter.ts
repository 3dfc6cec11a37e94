import type { Sql } from "../db/connect.ts";

export interface WindowCount {
  /** Requests counted in the current window, this one included. */
  count: number;
  /** Seconds until the window runs out and the count starts again (at least 1). */
  resetSeconds: number;
}

/**
 * Counts `requests` (one, or a batch a replica gathered) for `key` in one atomic upsert and
 * returns the window's count. The window starts at the key's first request and restarts with
 * the first request after it has run out. The database's clock decides, so every replica sees
 * the same windows.
 */
export async function countRequest(
  sql: Sql,
  key: string,
  windowSeconds: number,
  requests = 1,
): Promise<WindowCount> {
  const [row] = await sql<{ count: number; reset_seconds: number }[]>`
    insert into app.rate_limits as counter (key, window_start, count)
    values (${key}, now(), ${requests})
    on conflict (key) do update set
      window_start = case
        when counter.window_start <= now() - make_interval(secs => ${windowSeconds})
        then now() else counter.window_start end,
      count = case
        when counter.window_start <= now() - make_interval(secs => ${windowSeconds})
        then ${requests} else least(counter.count + ${requests}, 2000000000) end
    returning count,
      ceil(extract(epoch from
        window_start + make_interval(secs => ${windowSeconds}) - now()))::int as reset_seconds`;
  if (!row) throw new Error("the rate limit upsert returned no row");
  return { count: row.count, resetSeconds: Math.max(1, row.reset_seconds) };
}

/** Deletes the rows of windows that have run out; returns how many. */
export async function pruneRateLimits(sql: Sql, windowSeconds: number): Promise<number> {
  const deleted = await sql`
    delete from app.rate_limits
    where window_start <= now() - make_interval(secs => ${windowSeconds})`;
  return deleted.count;
}
