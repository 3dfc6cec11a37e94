--! no-transaction
-- Event retention's read (api/webhooks/eventRetention.ts, every 10 minutes): the fanned-out
-- events older than EVENT_RETENTION_DAYS. Walked by id, it read every event kept to find none
-- old enough once the backlog was pruned: 1.9 million events, 1.5 GB, at a year's steady state
-- (BENCHMARKS.md#a-year-of-traffic). By this index it reads only the old ones. Built
-- concurrently, so events are written meanwhile; a build interrupted before this migration was
-- recorded left an invalid index, dropped here before building again
-- (docs/operating.md#migrations-at-size).
drop index concurrently if exists app.events_fanned_out_by_time;
create index concurrently events_fanned_out_by_time on app.events (occurred_at) where fanned_out;
