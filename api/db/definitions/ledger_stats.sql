-- The ledger's figures kept as they change (app.ledger_days, app.ledger_day_payees,
-- app.ledger_payees, app.ledger_totals: migration 0027), in the transaction of the change, so a
-- read is a few rows however long the ledger (api/ledger/readLedgerStats.ts). A ledger entry is a
-- pair of a claim `completed` and a payout of it `confirmed`; it counts on the UTC day of the
-- claim's completed_at, for its payout address, the claim's payment value (received) and the
-- payout's amount (paid out). A completed claim without a completed_at (only a hand edit makes
-- one: lifecycle/completeClaims.ts sets both together) has no day to count on, so it has no
-- entry: the triggers and the count leave it out, as the fresh counts do
-- (api/ledger/readLedgerStats.ts, checkLedgerFigures.ts, which tells how many there are),
-- rather than fail the write that meets it or guess a day. Each trigger below moves the entries
-- of the one row that changed, reading the other tables as they are: a statement that changed
-- two of these tables at once (a data-modifying `with`) would be counted twice, and none does.
-- Each change of a claim's entries
-- holds the claim's row first (its update holds it; the payout and payment triggers lock it), so
-- two transactions changing one claim's claim, payout and payment rows count one after the other,
-- the second reading what the first committed, never both from before.
--
-- The figures hold the claims that app.count_ledger_figures (below) has counted: a trigger moves
-- the entries of a claim up to its cursor and leaves a claim past it to the count, which finds it
-- as its writer left it (docs/operating.md#the-ledgers-count-migration-0027). Nothing here counts
-- the figures again when this file is applied: `pay-and-earn doctor` compares them with a fresh
-- count. The triggers are made through app.define_trigger (define_trigger.sql), which leaves an
-- unchanged one alone: an edit of a function body here locks none of the tables.

-- Whether the figures hold the claim's entries: every claim once the count has finished, before
-- that the claims up to its cursor. A claim past it is not counted by the caller; the count's row
-- is then held (for share) to the end of the caller's transaction, so the count cannot pass the
-- claim before that transaction's change is committed and visible to it.
create or replace function app.ledger_holds_claim(claim text) returns boolean
language plpgsql as $$
declare
  counted_to text;
  finished boolean;
begin
  select b.counted_to, b.finished_at is not null into counted_to, finished from app.ledger_backfill b;
  if finished or claim <= counted_to then
    return true;
  end if;
  -- Read again under the lock: the count may have moved past the claim while this waited.
  select b.counted_to, b.finished_at is not null into counted_to, finished
  from app.ledger_backfill b for share;
  return coalesce(finished or claim <= counted_to, false);
end $$;

-- Entries of one payout address on one day in (entries > 0) or out (entries < 0): its count on
-- the day and over all days. Answers whether the address came (1) or went (-1) on the day and in
-- the totals: an address counts while it has an entry there. The caller moves the day's row and
-- the totals after it (app.ledger_move_day: for one entry from app.ledger_move_entry, once a day
-- at the end of a batch of migration 0027's count), so rows are locked in one order: the
-- address's day, the address, the day, the totals.
create or replace function app.ledger_move_payee(
  entry_day date, address text, entries bigint, out on_day int, out overall int
) language plpgsql as $$
declare
  day_entries bigint;
  all_entries bigint;
begin
  insert into app.ledger_day_payees as d (day, payout_address, entries)
  values (entry_day, address, entries)
  on conflict (day, payout_address) do update set entries = d.entries + excluded.entries
  returning d.entries into day_entries;
  if day_entries = 0 then
    delete from app.ledger_day_payees where day = entry_day and payout_address = address;
  end if;
  insert into app.ledger_payees as a (payout_address, entries) values (address, entries)
  on conflict (payout_address) do update set entries = a.entries + excluded.entries
  returning a.entries into all_entries;
  if all_entries = 0 then
    delete from app.ledger_payees where payout_address = address;
  end if;
  on_day := sign(greatest(day_entries, 0)) - sign(greatest(day_entries - entries, 0));
  overall := sign(greatest(all_entries, 0)) - sign(greatest(all_entries - entries, 0));
end $$;

-- A day's figures and the totals moved by `entries` entries (signed) and what they received and
-- paid out, with the addresses that came or went (app.ledger_move_payee).
create or replace function app.ledger_move_day(
  entry_day date, entries bigint, received numeric, paid_out numeric, on_day bigint,
  overall bigint
) returns void language plpgsql as $$
begin
  insert into app.ledger_days as d (day, completed_payouts, unique_payout_addresses, received,
    paid_out)
  values (entry_day, entries, on_day, received, paid_out)
  on conflict (day) do update set
    completed_payouts = d.completed_payouts + excluded.completed_payouts,
    unique_payout_addresses = d.unique_payout_addresses + excluded.unique_payout_addresses,
    received = d.received + excluded.received,
    paid_out = d.paid_out + excluded.paid_out;
  if overall <> 0 then
    update app.ledger_totals set unique_payout_addresses = unique_payout_addresses + overall;
  end if;
end $$;

-- One entry in (sign 1) or out (sign -1), as the triggers move them.
create or replace function app.ledger_move_entry(
  entry_day date, address text, received numeric, paid_out numeric, sign int
) returns void language plpgsql as $$
declare
  moved record;
begin
  moved := app.ledger_move_payee(entry_day, address, sign);
  perform app.ledger_move_day(entry_day, sign, sign * received, sign * paid_out, moved.on_day,
    moved.overall);
end $$;

create or replace function app.ledger_follows_claims() returns trigger language plpgsql as $$
begin
  if not app.ledger_holds_claim(new.id) then
    return null;
  end if;
  if old.status = 'completed' and old.completed_at is not null then
    perform app.ledger_move_entry((old.completed_at at time zone 'UTC')::date, old.payout_address,
      coalesce((select p.value from app.payments p where p.claim_id = old.id), 0), po.amount, -1)
    from app.payouts po where po.claim_id = old.id and po.status = 'confirmed';
  end if;
  if new.status = 'completed' and new.completed_at is not null then
    perform app.ledger_move_entry((new.completed_at at time zone 'UTC')::date, new.payout_address,
      coalesce((select p.value from app.payments p where p.claim_id = new.id), 0), po.amount, 1)
    from app.payouts po where po.claim_id = new.id and po.status = 'confirmed';
  end if;
  return null;
end $$;

select app.define_trigger('app.claims', 'ledger_follows_claims', $trigger$
  create or replace trigger ledger_follows_claims after update on app.claims
    for each row when ((old.status = 'completed' or new.status = 'completed')
      and (old.status, old.completed_at, old.payout_address)
        is distinct from (new.status, new.completed_at, new.payout_address))
    execute function app.ledger_follows_claims()$trigger$);

create or replace function app.ledger_follows_payouts() returns trigger language plpgsql as $$
begin
  -- No key update: what the claim's own update takes, so a foreign key's check waits for neither.
  perform 1 from app.claims c
  where c.id in (case when tg_op <> 'INSERT' then old.claim_id end,
    case when tg_op <> 'DELETE' then new.claim_id end)
  order by c.id
  for no key update;
  -- (Nested ifs: SQL's `and` does not promise to skip its right side.)
  if tg_op in ('UPDATE', 'DELETE') then
    if old.status = 'confirmed' and app.ledger_holds_claim(old.claim_id) then
      perform app.ledger_move_entry((c.completed_at at time zone 'UTC')::date, c.payout_address,
        coalesce((select p.value from app.payments p where p.claim_id = c.id), 0), old.amount, -1)
      from app.claims c
      where c.id = old.claim_id and c.status = 'completed' and c.completed_at is not null;
    end if;
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    if new.status = 'confirmed' and app.ledger_holds_claim(new.claim_id) then
      perform app.ledger_move_entry((c.completed_at at time zone 'UTC')::date, c.payout_address,
        coalesce((select p.value from app.payments p where p.claim_id = c.id), 0), new.amount, 1)
      from app.claims c
      where c.id = new.claim_id and c.status = 'completed' and c.completed_at is not null;
    end if;
  end if;
  return null;
end $$;

select app.define_trigger('app.payouts', 'ledger_follows_new_payouts', $trigger$
  create or replace trigger ledger_follows_new_payouts after insert on app.payouts
    for each row when (new.status = 'confirmed') execute function app.ledger_follows_payouts()$trigger$);
select app.define_trigger('app.payouts', 'ledger_follows_payouts', $trigger$
  create or replace trigger ledger_follows_payouts after update on app.payouts
    for each row when ((old.status = 'confirmed' or new.status = 'confirmed')
      and (old.status, old.amount, old.claim_id) is distinct from (new.status, new.amount, new.claim_id))
    execute function app.ledger_follows_payouts()$trigger$);
select app.define_trigger('app.payouts', 'ledger_follows_deleted_payouts', $trigger$
  create or replace trigger ledger_follows_deleted_payouts after delete on app.payouts
    for each row when (old.status = 'confirmed') execute function app.ledger_follows_payouts()$trigger$);

-- What each entry of the claim received, moved by `moved` (signed); nothing, without asking the
-- count's cursor, when the claim has no entry.
create or replace function app.ledger_move_received(claim text, moved numeric) returns void
language plpgsql as $$
declare
  entry record;
begin
  for entry in
    select (c.completed_at at time zone 'UTC')::date as day, count(*) as entries
    from app.claims c join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    where c.id = claim and c.status = 'completed' and c.completed_at is not null
    group by 1
  loop
    if app.ledger_holds_claim(claim) then
      update app.ledger_days d set received = d.received + moved * entry.entries
      where d.day = entry.day;
    end if;
  end loop;
end $$;

-- A payment's value is received once per entry of its claim. Most payments move none: the
-- service records a payment while its claim awaits one (lifecycle/recordPayments.ts), before any
-- completion. Such a change returns once the claim's row is held and shows no entry: it does not
-- ask whether the figures hold the claim, which during the count would wait for the count's batch
-- (app.ledger_holds_claim). The row is held first all the same, so that a completion or a payout
-- confirmed by another transaction at once is seen committed here, or sees this payment: a
-- payment inserted for a claim completed meanwhile still moves its entry, whoever writes it.
create or replace function app.ledger_follows_payments() returns trigger language plpgsql as $$
begin
  perform 1 from app.claims c
  where c.id in (case when tg_op <> 'INSERT' then old.claim_id end,
    case when tg_op <> 'DELETE' then new.claim_id end)
  order by c.id
  for no key update;
  if tg_op in ('UPDATE', 'DELETE') then
    perform app.ledger_move_received(old.claim_id, -old.value);
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform app.ledger_move_received(new.claim_id, new.value);
  end if;
  return null;
end $$;

select app.define_trigger('app.payments', 'ledger_follows_payments', $trigger$
  create or replace trigger ledger_follows_payments after insert or delete on app.payments
    for each row execute function app.ledger_follows_payments()$trigger$);
select app.define_trigger('app.payments', 'ledger_follows_changed_payments', $trigger$
  create or replace trigger ledger_follows_changed_payments after update on app.payments
    for each row when ((old.value, old.claim_id) is distinct from (new.value, new.claim_id))
    execute function app.ledger_follows_payments()$trigger$);

-- The count of the figures (migration 0027 made its tables; api/ledger/ledgerCountWorker.ts calls
-- it, after the service has started): every claim's entries, claim id after claim id, a batch of
-- claims with a live payout per transaction. A batch first takes the count's row (which waits for
-- the writers of claims past the cursor that can move an entry: each holds it for share to its
-- end), so the claims it counts have no change of their entries in flight. A payment whose claim
-- has no entry does not hold it: it holds the claim's row, which every change that would give the
-- claim an entry takes first, so none can appear before the payment commits, and the batch counts
-- the claim as it is (no entry) or after the payment (with it). Then it adds their entries to
-- the figures with the triggers' functions (every address's rows, then each day's, then the
-- totals) and moves the cursor.
-- Writers wait for a batch at most; a batch waits at most lock_wait, then gives way and tries again
-- (shorter than deadlock_timeout, so a writer never meets a deadlock through it). Runs outside
-- a transaction (it commits each batch); it returns after max_batches batches (all, when null),
-- or once it has finished, and a run cut short goes on from the cursor.
create or replace procedure app.count_ledger_figures(
  batch_size int default 200, lock_wait text default '100ms', max_batches int default null
) language plpgsql as $$
declare
  batches_done int := 0;
  was_counted_to text;
  batch text[];
  next_to text;
  started timestamptz;
  done boolean := false;
  gave_way bigint := 0;
  day record;
  came bigint;
begin
  loop
    begin
      perform set_config('lock_timeout', lock_wait, true);
      started := clock_timestamp();
      select b.counted_to, b.finished_at is not null into was_counted_to, done
      from app.ledger_backfill b for update;
      exit when done;
      -- This batch: the next claims with a live payout (an entry needs one); those between the
      -- cursor and the last of them without one have no entry to count. A batch shorter than
      -- batch_size is the last: no claim past it has a live payout yet, and a payout made later
      -- is counted by its trigger.
      select coalesce(array_agg(claim_id order by claim_id), '{}') into batch from (
        select po.claim_id from app.payouts po
        where po.status in ('signed', 'broadcast', 'confirmed')
          and po.claim_id > coalesce(was_counted_to, '')
        order by po.claim_id limit batch_size) b;
      next_to := case when cardinality(batch) = batch_size then batch[batch_size] end;
      -- Each address's rows first (all of them: the days are grouped after), then each day's,
      -- then the totals: the triggers' order, and the rows every writer may want (a day, the
      -- totals) held only for the end of the batch.
      came := 0;
      for day in
        select m.day, sum(m.entries) as entries, sum(m.received) as received,
          sum(m.paid_out) as paid_out, sum((m.moved).on_day) as on_day,
          sum((m.moved).overall) as overall
        from (
          select e.day, count(*) as entries, sum(e.received) as received,
            sum(e.paid_out) as paid_out,
            app.ledger_move_payee(e.day, e.address, count(*)) as moved
          from (
            select (c.completed_at at time zone 'UTC')::date as day, c.payout_address as address,
              coalesce(p.value, 0) as received, po.amount as paid_out
            from app.payouts po
            join app.claims c on c.id = po.claim_id and c.status = 'completed'
              and c.completed_at is not null
            left join app.payments p on p.claim_id = c.id
            where po.claim_id = any(batch) and po.status = 'confirmed'
          ) e
          group by e.day, e.address
          order by e.day, e.address
          offset 0
        ) m
        group by m.day
        order by m.day
      loop
        perform app.ledger_move_day(day.day, day.entries::bigint, day.received, day.paid_out,
          day.on_day::bigint, 0);
        came := came + day.overall;
      end loop;
      if came <> 0 then
        update app.ledger_totals set unique_payout_addresses = unique_payout_addresses + came;
      end if;
      update app.ledger_backfill set
        counted_to = coalesce(next_to, counted_to),
        finished_at = case when next_to is null then now() end,
        batches = batches + 1,
        retries = retries + gave_way,
        longest_batch_ms = greatest(longest_batch_ms,
          extract(epoch from clock_timestamp() - started) * 1000);
      gave_way := 0;
      done := next_to is null;
      batches_done := batches_done + 1;
    exception when lock_not_available or deadlock_detected then
      -- Gave way to a writer: this batch is undone (counted with the next one that commits);
      -- a moment, then again.
      gave_way := gave_way + 1;
      done := false;
    end;
    commit;
    exit when done or batches_done >= max_batches;
    if gave_way > 0 then
      perform pg_sleep(0.05);
    end if;
  end loop;
end $$;
