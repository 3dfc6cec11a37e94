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
  const counted = await countRequests(sql, new Map([[key, requests]]), windowSeconds);
  const count = counted.get(key);
  if (!count) throw new Error("the rate limit upsert returned no row");
  return count;
}

/**
 * Counts many keys' requests in one statement (one round trip, however many clients): what a
 * replica gathered since its last flush. Each key appears once in `requests`.
 */
export async function countRequests(
  sql: Sql,
  requests: ReadonlyMap<string, number>,
  windowSeconds: number,
): Promise<Map<string, WindowCount>> {
  if (requests.size === 0) return new Map();
  const keys = [...requests.keys()];
  const counts = keys.map((key) => requests.get(key) as number);
  const rows = await sql<{ key: string; count: number; reset_seconds: number }[]>`
    insert into app.rate_limits as counter (key, window_start, count)
    select key, now(), requests
    from unnest(${keys}::text[], ${counts}::int[]) as batch(key, requests)
    on conflict (key) do update set
      window_start = case
        when counter.window_start <= now() - make_interval(secs => ${windowSeconds})
        then now() else counter.window_start end,
      count = case
        when counter.window_start <= now() - make_interval(secs => ${windowSeconds})
        then excluded.count else least(counter.count + excluded.count, 2000000000) end
    returning key, count,
      ceil(extract(epoch from
        window_start + make_interval(secs => ${windowSeconds}) - now()))::int as reset_seconds`;
  return new Map(
    rows.map((row) => [
      row.key,
      { count: row.count, resetSeconds: Math.max(1, row.reset_seconds) },
    ]),
  );
}

/** Deletes the rows of windows that have run out; returns how many. */
export async function pruneRateLimits(sql: Sql, windowSeconds: number): Promise<number> {
  const deleted = await sql`
    delete from app.rate_limits
    where window_start <= now() - make_interval(secs => ${windowSeconds})`;
  return deleted.count;
}
