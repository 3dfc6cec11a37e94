-- Request counters for the HTTP rate limits (api/rateLimits), shared by every replica.
-- One row per client and route class: a fixed window that starts at the client's first
-- request and restarts at the first request after it has run out; one atomic upsert per
-- request counts it. Rows of windows that have run out are pruned.
--
-- UNLOGGED: counters are worth no WAL. After a crash of PostgreSQL the table comes back empty
-- and standbys do not have it, so a failover forgets the counts: the limits start afresh,
-- which is harmless.
create unlogged table app.rate_limits (
  -- '<route class>:<client address>', e.g. 'write:203.0.113.7' or 'read:2001:db8:1:2::/64'.
  key text primary key,
  window_start timestamptz not null,
  count integer not null check (count > 0)
);
create index rate_limits_by_window_start on app.rate_limits (window_start);
