-- The counts /metrics shows, kept as rows change (migration 0032; docs/operating.md#the-scrapes-counts-migration-0032):
-- claims by status, payouts sent, confirmed and reverted, mails sent, replied and failed, and the
-- inbound messages kept by status and outcome. Each writing statement on those tables appends a
-- change row per label it moved to app.row_count_changes, in its own transaction, from its
-- transition tables (shared with the events' triggers on app.claims: no second copy of the rows).
-- Nothing is updated in place: concurrent claim creations each append their own row and never
-- wait for one another. The row-counts worker (api/metrics/rowCountWorker.ts) folds the changes
-- into app.row_counts every second (app.fold_row_count_changes) and counted every row once after
-- migration 0032 (app.count_rows); a reader adds the changes not folded yet to the folded counts,
-- in one statement (api/db/rowCounts.ts). The triggers are made through app.define_trigger
-- (define_trigger.sql), which leaves an unchanged one alone: an edit of a function body here
-- locks none of the tables.

-- What a payout counts as: sent once broadcast (or finished, whether or not it was broadcast by
-- this service), confirmed, reverted. pay_and_earn_payouts_total{event}.
create or replace function app.payout_count_labels(status text, broadcasts integer) returns text[]
language sql immutable as $$
  select array_remove(array[
    case when broadcasts > 0 or status in ('confirmed', 'reverted') then 'sent' end,
    case when status = 'confirmed' then 'confirmed' end,
    case when status = 'reverted' then 'reverted' end], null)
$$;

-- What a queued mail counts as: sent, replied (an answer to an inbound message, sent), failed.
-- pay_and_earn_mails_total{event}.
create or replace function app.outbox_count_labels(status text, kind text) returns text[]
language sql immutable as $$
  select array_remove(array[
    case when status = 'sent' then 'sent' end,
    case when status = 'sent' and kind in ('mail_instructions', 'mail_reply') then 'replied' end,
    case when status = 'failed' then 'failed' end], null)
$$;

create or replace function app.count_changed_claims() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    insert into app.row_count_changes (counted, label, change)
    select 'claims', n.status, count(*) from new_claims n group by n.status;
  elsif tg_op = 'DELETE' then
    insert into app.row_count_changes (counted, label, change)
    select 'claims', o.status, -count(*) from old_claims o group by o.status;
  else
    insert into app.row_count_changes (counted, label, change)
    select 'claims', c.status, sum(c.change) from (
      select o.status, -1 as change from old_claims o
      union all select n.status, 1 from new_claims n) c
    group by c.status having sum(c.change) <> 0;
  end if;
  return null;
end $$;

create or replace function app.count_changed_payouts() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    insert into app.row_count_changes (counted, label, change)
    select 'payouts', l.label, count(*)
    from new_payouts n cross join lateral unnest(app.payout_count_labels(n.status, n.broadcasts)) l(label)
    group by l.label;
  elsif tg_op = 'DELETE' then
    insert into app.row_count_changes (counted, label, change)
    select 'payouts', l.label, -count(*)
    from old_payouts o cross join lateral unnest(app.payout_count_labels(o.status, o.broadcasts)) l(label)
    group by l.label;
  else
    insert into app.row_count_changes (counted, label, change)
    select 'payouts', l.label, sum(c.change) from (
      select o.status, o.broadcasts, -1 as change from old_payouts o
      union all select n.status, n.broadcasts, 1 from new_payouts n) c
      cross join lateral unnest(app.payout_count_labels(c.status, c.broadcasts)) l(label)
    group by l.label having sum(c.change) <> 0;
  end if;
  return null;
end $$;

create or replace function app.count_changed_outbox() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    insert into app.row_count_changes (counted, label, change)
    select 'outbox', l.label, count(*)
    from new_mails n cross join lateral unnest(app.outbox_count_labels(n.status, n.kind)) l(label)
    group by l.label;
  elsif tg_op = 'DELETE' then
    insert into app.row_count_changes (counted, label, change)
    select 'outbox', l.label, -count(*)
    from old_mails o cross join lateral unnest(app.outbox_count_labels(o.status, o.kind)) l(label)
    group by l.label;
  else
    insert into app.row_count_changes (counted, label, change)
    select 'outbox', l.label, sum(c.change) from (
      select o.status, o.kind, -1 as change from old_mails o
      union all select n.status, n.kind, 1 from new_mails n) c
      cross join lateral unnest(app.outbox_count_labels(c.status, c.kind)) l(label)
    group by l.label having sum(c.change) <> 0;
  end if;
  return null;
end $$;

-- The inbound messages kept, by status and outcome (none: ''). Those deleted by retention leave
-- these counts and are counted in app.mail_messages_pruned by the deleting statement.
create or replace function app.count_changed_mail_messages() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    insert into app.row_count_changes (counted, label, detail, change)
    select 'mail_messages', n.status, coalesce(n.outcome, ''), count(*)
    from new_messages n group by n.status, coalesce(n.outcome, '');
  elsif tg_op = 'DELETE' then
    insert into app.row_count_changes (counted, label, detail, change)
    select 'mail_messages', o.status, coalesce(o.outcome, ''), -count(*)
    from old_messages o group by o.status, coalesce(o.outcome, '');
  else
    insert into app.row_count_changes (counted, label, detail, change)
    select 'mail_messages', c.status, c.outcome, sum(c.change) from (
      select o.status, coalesce(o.outcome, '') as outcome, -1 as change from old_messages o
      union all select n.status, coalesce(n.outcome, ''), 1 from new_messages n) c
    group by c.status, c.outcome having sum(c.change) <> 0;
  end if;
  return null;
end $$;

-- A truncated table (the tests' reset; never the service) has no rows left to count. Truncate
-- holds the table alone, so no change of it is in flight.
create or replace function app.count_truncated() returns trigger language plpgsql as $$
begin
  delete from app.row_count_changes where counted = tg_argv[0];
  delete from app.row_counts where counted = tg_argv[0];
  return null;
end $$;

-- Statement triggers: one change row per label a statement moved, whatever its number of rows
-- (a batch of claim creations is one insert). Transition tables allow one event per trigger.
select app.define_trigger('app.claims', 'claims_counted_inserts', $trigger$
  create or replace trigger claims_counted_inserts after insert on app.claims
    referencing new table as new_claims
    for each statement execute function app.count_changed_claims()$trigger$);
select app.define_trigger('app.claims', 'claims_counted_updates', $trigger$
  create or replace trigger claims_counted_updates after update on app.claims
    referencing old table as old_claims new table as new_claims
    for each statement execute function app.count_changed_claims()$trigger$);
select app.define_trigger('app.claims', 'claims_counted_deletes', $trigger$
  create or replace trigger claims_counted_deletes after delete on app.claims
    referencing old table as old_claims
    for each statement execute function app.count_changed_claims()$trigger$);
select app.define_trigger('app.claims', 'claims_counted_truncates', $trigger$
  create or replace trigger claims_counted_truncates after truncate on app.claims
    for each statement execute function app.count_truncated('claims')$trigger$);

select app.define_trigger('app.payouts', 'payouts_counted_inserts', $trigger$
  create or replace trigger payouts_counted_inserts after insert on app.payouts
    referencing new table as new_payouts
    for each statement execute function app.count_changed_payouts()$trigger$);
select app.define_trigger('app.payouts', 'payouts_counted_updates', $trigger$
  create or replace trigger payouts_counted_updates after update on app.payouts
    referencing old table as old_payouts new table as new_payouts
    for each statement execute function app.count_changed_payouts()$trigger$);
select app.define_trigger('app.payouts', 'payouts_counted_deletes', $trigger$
  create or replace trigger payouts_counted_deletes after delete on app.payouts
    referencing old table as old_payouts
    for each statement execute function app.count_changed_payouts()$trigger$);
select app.define_trigger('app.payouts', 'payouts_counted_truncates', $trigger$
  create or replace trigger payouts_counted_truncates after truncate on app.payouts
    for each statement execute function app.count_truncated('payouts')$trigger$);

select app.define_trigger('app.outbox', 'outbox_counted_inserts', $trigger$
  create or replace trigger outbox_counted_inserts after insert on app.outbox
    referencing new table as new_mails
    for each statement execute function app.count_changed_outbox()$trigger$);
select app.define_trigger('app.outbox', 'outbox_counted_updates', $trigger$
  create or replace trigger outbox_counted_updates after update on app.outbox
    referencing old table as old_mails new table as new_mails
    for each statement execute function app.count_changed_outbox()$trigger$);
select app.define_trigger('app.outbox', 'outbox_counted_deletes', $trigger$
  create or replace trigger outbox_counted_deletes after delete on app.outbox
    referencing old table as old_mails
    for each statement execute function app.count_changed_outbox()$trigger$);
select app.define_trigger('app.outbox', 'outbox_counted_truncates', $trigger$
  create or replace trigger outbox_counted_truncates after truncate on app.outbox
    for each statement execute function app.count_truncated('outbox')$trigger$);

select app.define_trigger('app.mail_messages', 'mail_messages_counted_inserts', $trigger$
  create or replace trigger mail_messages_counted_inserts after insert on app.mail_messages
    referencing new table as new_messages
    for each statement execute function app.count_changed_mail_messages()$trigger$);
select app.define_trigger('app.mail_messages', 'mail_messages_counted_updates', $trigger$
  create or replace trigger mail_messages_counted_updates after update on app.mail_messages
    referencing old table as old_messages new table as new_messages
    for each statement execute function app.count_changed_mail_messages()$trigger$);
select app.define_trigger('app.mail_messages', 'mail_messages_counted_deletes', $trigger$
  create or replace trigger mail_messages_counted_deletes after delete on app.mail_messages
    referencing old table as old_messages
    for each statement execute function app.count_changed_mail_messages()$trigger$);
select app.define_trigger('app.mail_messages', 'mail_messages_counted_truncates', $trigger$
  create or replace trigger mail_messages_counted_truncates after truncate on app.mail_messages
    for each statement execute function app.count_truncated('mail_messages')$trigger$);

-- Moves up to 10,000 changes committed so far into app.row_counts, in one statement: a reader's
-- snapshot sees each change either in app.row_count_changes or in app.row_counts, never both or
-- neither. Two folds at once each move the rows they deleted (the second skips the first's).
-- Returns the number of change rows folded: 10,000 means more may wait. In batches, so that a
-- backlog (a worker stopped for a while, its triggers appending on) is folded within the
-- workers' statement timeout, a batch at a time, and never holds the fold back for good.
create or replace function app.fold_row_count_changes() returns bigint language sql as $$
  with gone as (
    delete from app.row_count_changes c
    where c.ctid = any(array(select w.ctid from app.row_count_changes w limit 10000))
    returning c.counted, c.label, c.detail, c.change
  ), summed as (
    select counted, label, detail, sum(change) as n, count(*) as rows
    from gone group by counted, label, detail
  ), folded as (
    insert into app.row_counts as r (counted, label, detail, n)
    select counted, label, detail, n from summed where n <> 0
    on conflict (counted, label, detail) do update set n = r.n + excluded.n
  )
  select coalesce(sum(rows), 0)::bigint from summed
$$;

-- Counts every row once, as a snapshot sees them, and keeps that instead of the changes the same
-- snapshot sees: run in a repeatable read transaction (api/db/rowCounts.ts, countRows), whose
-- one snapshot both counts the rows and deletes the changes whose transactions it sees. A change
-- it does not see (committed after it began) is of a row it did not count as changed: it stays,
-- to be folded. The triggers exist before it runs (the start applies the definitions before the
-- worker starts), so no change is missed. Reads every row: seconds at a year, locking nothing a
-- writer waits for (docs/operating.md#the-scrapes-counts-migration-0032).
-- Every kept count as a count over the tables gives it now: what app.count_rows keeps, and what
-- `pay-and-earn doctor` compares the kept counts with (api/db/rowCounts.ts checkRowCounts).
create or replace function app.fresh_row_counts()
returns table (counted text, label text, detail text, n bigint) language sql stable as $$
  select 'claims', c.status, '', count(*) from app.claims c group by c.status
  union all
  select 'payouts', l.label, '', count(*)
  from app.payouts p cross join lateral unnest(app.payout_count_labels(p.status, p.broadcasts)) l(label)
  group by l.label
  union all
  select 'outbox', l.label, '', count(*)
  from app.outbox o cross join lateral unnest(app.outbox_count_labels(o.status, o.kind)) l(label)
  group by l.label
  union all
  select 'mail_messages', m.status, coalesce(m.outcome, ''), count(*)
  from app.mail_messages m group by m.status, coalesce(m.outcome, '')
$$;

create or replace function app.count_rows() returns void language plpgsql as $$
declare
  started timestamptz := clock_timestamp();
begin
  if current_setting('transaction_isolation') <> 'repeatable read' then
    raise exception 'app.count_rows() needs one snapshot: call it in a repeatable read transaction';
  end if;
  delete from app.row_count_changes;
  delete from app.row_counts;
  insert into app.row_counts (counted, label, detail, n)
  select f.counted, f.label, f.detail, f.n from app.fresh_row_counts() f;
  update app.row_count_state
  set counted_at = now(), count_ms = extract(epoch from clock_timestamp() - started) * 1000;
end $$;
