-- The ledger's figures (GET /ledger, GraphQL stats: api/ledger/readLedgerStats.ts) kept as they
-- change instead of aggregated over every completed payout on each read, which took seconds at a
-- year's size (BENCHMARKS.md#a-year-of-traffic). A ledger entry is a completed claim with a
-- confirmed payout, as the figures always counted it; its day is the UTC day of completed_at.
-- The triggers of api/db/definitions/ledger_stats.sql keep these rows in the transaction of each
-- change, for the claims its count has reached; the count runs after the service has started
-- (api/ledger/ledgerCountWorker.ts), in short batches, and no write waits for more than one batch
-- (docs/operating.md#the-ledgers-count-migration-0027). New tables: nothing to lock.
create table if not exists app.ledger_days (
  day date primary key,
  completed_payouts bigint not null default 0,
  unique_payout_addresses bigint not null default 0,
  received numeric(78, 0) not null default 0,
  paid_out numeric(78, 0) not null default 0
);
-- Entries per payout address, per day and over all days: an address counts while it has one.
create table if not exists app.ledger_day_payees (
  day date not null,
  payout_address text not null,
  entries bigint not null,
  primary key (day, payout_address)
);
create table if not exists app.ledger_payees (
  payout_address text primary key,
  entries bigint not null
);
create table if not exists app.ledger_totals (
  only_row boolean primary key default true check (only_row),
  unique_payout_addresses bigint not null default 0
);
insert into app.ledger_totals (only_row) values (true) on conflict do nothing;
-- How far the count has gone, by claim id: the triggers keep the figures of the claims up to
-- counted_to (of every claim once finished_at is set); the readers aggregate as before until
-- then. The longest batch is how long a write could have waited for it.
create table if not exists app.ledger_backfill (
  only_row boolean primary key default true check (only_row),
  counted_to text,
  finished_at timestamptz,
  batches bigint not null default 0,
  retries bigint not null default 0,
  longest_batch_ms double precision not null default 0
);
insert into app.ledger_backfill (only_row) values (true) on conflict do nothing;
