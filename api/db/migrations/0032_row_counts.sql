-- The counts /metrics shows (claims by status, payouts sent, confirmed and reverted, mails sent,
-- replied and failed, the inbound messages kept by status and outcome) kept as rows change,
-- instead of counted over every claim, payout and mail on each scrape: at a year's size that read
-- 10 million claims every scrape (BENCHMARKS.md#a-year-of-traffic). The triggers of
-- api/db/definitions/row_counts.sql append a change row per statement and label; the row-counts
-- worker (api/metrics/rowCountWorker.ts) folds them into app.row_counts, and counts every row once
-- after this migration, in one snapshot, after the start (docs/operating.md#the-scrapes-counts-migration-0032).
-- New tables: nothing to lock.

-- The folded counts: `counted` is the table, `label` what is counted (a claim status, a payout
-- event, a mail event, an inbound message's status), `detail` the inbound message's outcome
-- ('' for none).
create table if not exists app.row_counts (
  counted text not null,
  label text not null,
  detail text not null default '',
  n bigint not null,
  primary key (counted, label, detail)
);

-- Changes not folded yet, appended by the triggers: inserts only, so concurrent writers never
-- wait for each other here. No index: the fold reads and deletes them every second, and the
-- readers add them to the folded counts. Vacuumed after a fixed number of rows, not a fifth of
-- the table, so that its pages stay few; and never truncated by vacuum, whose exclusive lock,
-- brief as it is, the writers' triggers would queue behind.
create table if not exists app.row_count_changes (
  counted text not null,
  label text not null,
  detail text not null default '',
  change bigint not null
) with (
  autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
  autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000,
  vacuum_truncate = false
);

-- Whether the counts hold every row: set by the worker's count, in the snapshot it counted;
-- until then the readers count afresh, as before. Cleared by hand to count again.
create table if not exists app.row_count_state (
  only_row boolean primary key default true check (only_row),
  counted_at timestamptz,
  count_ms double precision
);
insert into app.row_count_state (only_row) values (true) on conflict do nothing;
