-- The ledger's figures kept as they change (app.ledger_days, app.ledger_day_payees,
-- app.ledger_payees, app.ledger_totals: migration 0027), in the transaction of the change, so a
-- read is a few rows however long the ledger (api/ledger/readLedgerStats.ts). A ledger entry is a
-- pair of a claim `completed` and a payout of it `confirmed`; it counts on the UTC day of the
-- claim's completed_at, for its payout address, the claim's payment value (received) and the
-- payout's amount (paid out). Each trigger below moves the entries of the one row that changed,
-- reading the other tables as they are: a statement that changed two of these tables at once
-- (a data-modifying `with`) would be counted twice, and none does. Each change of a claim's entries
-- holds the claim's row first (its update holds it; the payout and payment triggers lock it), so
-- two transactions changing one claim's claim, payout and payment rows count one after the other,
-- the second reading what the first committed, never both from before.
--
-- The figures hold the claims that app.count_ledger_figures (migration 0027) has counted: a
-- trigger moves the entries of a claim up to its cursor and leaves a claim past it to the count,
-- which finds it as its writer left it (docs/operating.md#migrations-at-size). Nothing here counts
-- the figures again when this file is applied: `pay-and-earn doctor` compares them with a fresh
-- count.

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

-- One entry in (sign 1) or out (sign -1).
create or replace function app.ledger_move_entry(
  entry_day date, address text, received numeric, paid_out numeric, sign int
) returns void language plpgsql as $$
declare
  day_entries bigint;
  all_entries bigint;
begin
  insert into app.ledger_day_payees as d (day, payout_address, entries)
  values (entry_day, address, sign)
  on conflict (day, payout_address) do update set entries = d.entries + sign
  returning entries into day_entries;
  if day_entries = 0 then
    delete from app.ledger_day_payees where day = entry_day and payout_address = address;
  end if;
  insert into app.ledger_days as d (day, completed_payouts, unique_payout_addresses, received,
    paid_out)
  values (entry_day, sign,
    case when sign = 1 and day_entries = 1 then 1 when sign = -1 and day_entries = 0 then -1
      else 0 end,
    sign * received, sign * paid_out)
  on conflict (day) do update set
    completed_payouts = d.completed_payouts + excluded.completed_payouts,
    unique_payout_addresses = d.unique_payout_addresses + excluded.unique_payout_addresses,
    received = d.received + excluded.received,
    paid_out = d.paid_out + excluded.paid_out;
  insert into app.ledger_payees as a (payout_address, entries) values (address, sign)
  on conflict (payout_address) do update set entries = a.entries + sign
  returning entries into all_entries;
  if all_entries = 0 then
    delete from app.ledger_payees where payout_address = address;
  end if;
  if (sign = 1 and all_entries = 1) or (sign = -1 and all_entries = 0) then
    insert into app.ledger_totals as t (only_row, unique_payout_addresses) values (true, sign)
    on conflict (only_row) do update
    set unique_payout_addresses = t.unique_payout_addresses + sign;
  end if;
end $$;

create or replace function app.ledger_follows_claims() returns trigger language plpgsql as $$
begin
  if not app.ledger_holds_claim(new.id) then
    return null;
  end if;
  if old.status = 'completed' then
    perform app.ledger_move_entry((old.completed_at at time zone 'UTC')::date, old.payout_address,
      coalesce((select p.value from app.payments p where p.claim_id = old.id), 0), po.amount, -1)
    from app.payouts po where po.claim_id = old.id and po.status = 'confirmed';
  end if;
  if new.status = 'completed' then
    perform app.ledger_move_entry((new.completed_at at time zone 'UTC')::date, new.payout_address,
      coalesce((select p.value from app.payments p where p.claim_id = new.id), 0), po.amount, 1)
    from app.payouts po where po.claim_id = new.id and po.status = 'confirmed';
  end if;
  return null;
end $$;

create or replace trigger ledger_follows_claims after update on app.claims
  for each row when ((old.status = 'completed' or new.status = 'completed')
    and (old.status, old.completed_at, old.payout_address)
      is distinct from (new.status, new.completed_at, new.payout_address))
  execute function app.ledger_follows_claims();

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
      from app.claims c where c.id = old.claim_id and c.status = 'completed';
    end if;
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    if new.status = 'confirmed' and app.ledger_holds_claim(new.claim_id) then
      perform app.ledger_move_entry((c.completed_at at time zone 'UTC')::date, c.payout_address,
        coalesce((select p.value from app.payments p where p.claim_id = c.id), 0), new.amount, 1)
      from app.claims c where c.id = new.claim_id and c.status = 'completed';
    end if;
  end if;
  return null;
end $$;

create or replace trigger ledger_follows_new_payouts after insert on app.payouts
  for each row when (new.status = 'confirmed') execute function app.ledger_follows_payouts();
create or replace trigger ledger_follows_payouts after update on app.payouts
  for each row when ((old.status = 'confirmed' or new.status = 'confirmed')
    and (old.status, old.amount, old.claim_id) is distinct from (new.status, new.amount, new.claim_id))
  execute function app.ledger_follows_payouts();
create or replace trigger ledger_follows_deleted_payouts after delete on app.payouts
  for each row when (old.status = 'confirmed') execute function app.ledger_follows_payouts();

-- A payment's value is received once per entry of its claim.
create or replace function app.ledger_follows_payments() returns trigger language plpgsql as $$
begin
  perform 1 from app.claims c
  where c.id in (case when tg_op <> 'INSERT' then old.claim_id end,
    case when tg_op <> 'DELETE' then new.claim_id end)
  order by c.id
  for no key update;
  if tg_op in ('UPDATE', 'DELETE') then
    if app.ledger_holds_claim(old.claim_id) then
      update app.ledger_days d set received = d.received - old.value * e.entries
      from (select (c.completed_at at time zone 'UTC')::date as day, count(*) as entries
        from app.claims c join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
        where c.id = old.claim_id and c.status = 'completed' group by 1) e
      where d.day = e.day;
    end if;
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    if app.ledger_holds_claim(new.claim_id) then
      update app.ledger_days d set received = d.received + new.value * e.entries
      from (select (c.completed_at at time zone 'UTC')::date as day, count(*) as entries
        from app.claims c join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
        where c.id = new.claim_id and c.status = 'completed' group by 1) e
      where d.day = e.day;
    end if;
  end if;
  return null;
end $$;

create or replace trigger ledger_follows_payments after insert or delete on app.payments
  for each row execute function app.ledger_follows_payments();
create or replace trigger ledger_follows_changed_payments after update on app.payments
  for each row when ((old.value, old.claim_id) is distinct from (new.value, new.claim_id))
  execute function app.ledger_follows_payments();

-- The count of migration 0027: every claim's entries, claim id after claim id, a batch of claims
-- with a live payout per transaction. A batch first takes the count's row (which waits for the
-- writers of claims past the cursor: each holds it for share to its end), so the claims it counts
-- have no change in flight; then it adds their entries to the figures, in the order the triggers
-- lock them (a day's payees, the day, the payees, the totals), and moves the cursor. Writers
-- wait for a batch at most; a batch waits at most lock_wait, then gives way and tries again
-- (shorter than deadlock_timeout, so a writer never meets a deadlock through it). Runs outside
-- a transaction (it commits each batch); a run cut short goes on from the cursor.
create or replace procedure app.count_ledger_figures(
  batch_size int default 500, lock_wait text default '100ms'
) language plpgsql as $$
declare
  was_counted_to text;
  next_to text;
  started timestamptz;
  done boolean := false;
  gave_way bigint := 0;
begin
  loop
    begin
      perform set_config('lock_timeout', lock_wait, true);
      started := clock_timestamp();
      select b.counted_to, b.finished_at is not null into was_counted_to, done
      from app.ledger_backfill b for update;
      exit when done;
      -- The last claim of this batch, among the claims with a live payout (an entry needs one):
      -- the claims between the cursor and it without one have no entry to count.
      select po.claim_id into next_to from app.payouts po
      where po.status in ('signed', 'broadcast', 'confirmed')
        and (was_counted_to is null or po.claim_id > was_counted_to)
      order by po.claim_id offset batch_size - 1 limit 1;
      with entries as (
        select (c.completed_at at time zone 'UTC')::date as day, c.payout_address as address,
          coalesce(p.value, 0) as received, po.amount as paid_out
        from app.payouts po
        join app.claims c on c.id = po.claim_id and c.status = 'completed'
        left join app.payments p on p.claim_id = c.id
        where po.status = 'confirmed'
          and (was_counted_to is null or po.claim_id > was_counted_to)
          and (next_to is null or po.claim_id <= next_to)
      ),
      per_day_payee as (
        select day, address, count(*) as entries from entries group by 1, 2 order by 1, 2
      ),
      day_payees as (
        insert into app.ledger_day_payees as d (day, payout_address, entries)
        select day, address, entries from per_day_payee
        on conflict (day, payout_address) do update set entries = d.entries + excluded.entries
        returning d.day, d.payout_address, d.entries
      ),
      -- An address is new on its day when its row holds only this batch's entries.
      new_on_day as (
        select n.day, count(*) as addresses from day_payees n
        join per_day_payee b on b.day = n.day and b.address = n.payout_address
        where n.entries = b.entries group by n.day
      ),
      per_day as (
        select day, count(*) as entries, sum(received) as received, sum(paid_out) as paid_out
        from entries group by day order by day
      )
      insert into app.ledger_days as d (day, completed_payouts, unique_payout_addresses,
        received, paid_out)
      select b.day, b.entries, coalesce(n.addresses, 0), b.received, b.paid_out
      from per_day b left join new_on_day n on n.day = b.day
      order by b.day
      on conflict (day) do update set
        completed_payouts = d.completed_payouts + excluded.completed_payouts,
        unique_payout_addresses = d.unique_payout_addresses + excluded.unique_payout_addresses,
        received = d.received + excluded.received,
        paid_out = d.paid_out + excluded.paid_out;
      with per_payee as (
        select c.payout_address as address, count(*) as entries
        from app.payouts po
        join app.claims c on c.id = po.claim_id and c.status = 'completed'
        where po.status = 'confirmed'
          and (was_counted_to is null or po.claim_id > was_counted_to)
          and (next_to is null or po.claim_id <= next_to)
        group by 1 order by 1
      ),
      payees as (
        insert into app.ledger_payees as a (payout_address, entries)
        select address, entries from per_payee
        on conflict (payout_address) do update set entries = a.entries + excluded.entries
        returning a.payout_address, a.entries
      )
      update app.ledger_totals t
      set unique_payout_addresses = t.unique_payout_addresses + (
        select count(*) from payees n join per_payee b on b.address = n.payout_address
        where n.entries = b.entries);
      update app.ledger_backfill set
        counted_to = coalesce(next_to, counted_to),
        finished_at = case when next_to is null then now() end,
        batches = batches + 1,
        retries = retries + gave_way,
        longest_batch_ms = greatest(longest_batch_ms,
          extract(epoch from clock_timestamp() - started) * 1000);
      gave_way := 0;
      done := next_to is null;
    exception when lock_not_available or deadlock_detected then
      -- Gave way to a writer: this batch is undone (counted with the next one that commits);
      -- a moment, then again.
      gave_way := gave_way + 1;
      done := false;
    end;
    commit;
    exit when done;
    if gave_way > 0 then
      perform pg_sleep(0.05);
    end if;
  end loop;
end $$;
