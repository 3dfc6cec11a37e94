-- Events (docs/events.md): each change of a claim and each unmatched transfer writes its event
-- into app.events (api/db/migrations/0026_events.sql) in the transaction that makes the change,
-- whichever module or function made it: no transition commits without its event, no event
-- without its transition. The snapshot takes jsonb rather than a row of app.claim_details, so
-- that the view can still be dropped and made again (claim_details.sql). The triggers are made
-- through app.define_trigger (define_trigger.sql), which leaves an unchanged one alone: an edit
-- of a function body here locks none of the tables.

-- A claim as app.claim_details has it, its numbers as text (JSON numbers lose digits).
create or replace function app.claim_snapshot(d jsonb) returns jsonb
language sql immutable as $$
  select d || jsonb_build_object(
    'amount_due', d->>'amount_due',
    'payment_value', d->>'payment_value',
    'payment_block', d->>'payment_block')
$$;

create or replace function app.claim_event_type(status text) returns text
language sql immutable as $$
  select case status when 'awaiting_payment' then 'claim.created' else 'claim.' || status end
$$;

-- Plans: a trigger's statements have no parameters, so each is planned once per connection, on
-- the transition table of its first call (and again after the tables' statistics change), and
-- kept. A plain join leaves the choice to that first call: one version of these functions, given
-- an expiry of thousands of claims first, hashed the whole claims table and kept doing so for
-- each single change after it (80,000 rows read to record one claim's change, in
-- test/integration/eventOutbox.test.ts). So each claim's details are read by a lateral subquery
-- on its id that cannot be flattened into a join (`limit 1`): an index probe per changed claim,
-- whatever the first call's size.
--
-- No NOTIFY for a creation: a transaction that notifies takes a database-wide lock from its
-- commit's start to its end, so notifying creations would commit one at a time
-- (docs/traps.md#postgresql). The delivery worker finds claim.created within its interval
-- (WEBHOOK_INTERVAL_MS); the changes after it are written by the workers a round at a time, and
-- wake it.
create or replace function app.record_created_claims() returns trigger
language plpgsql as $$
begin
  insert into app.events (type, claim_id, ordering_key, snapshot)
  select app.claim_event_type(d.status), n.id, n.id, d.snapshot
  from new_claims n
    cross join lateral (
      select c.status, app.claim_snapshot(to_jsonb(c)) as snapshot
      from app.claim_details c where c.id = n.id limit 1) d
  order by n.id;
  return null;
end $$;

create or replace function app.record_changed_claims() returns trigger
language plpgsql as $$
begin
  insert into app.events (type, claim_id, ordering_key, snapshot)
  select app.claim_event_type(d.status), n.id, n.id, d.snapshot
  from new_claims n
    join old_claims o on o.id = n.id
    cross join lateral (
      select c.status, app.claim_snapshot(to_jsonb(c)) as snapshot
      from app.claim_details c where c.id = n.id limit 1) d
  where n.status is distinct from o.status
  order by n.id;
  if found then
    perform pg_notify('pay_and_earn_events', '');
  end if;
  return null;
end $$;

-- A claim whose first candidate amount was taken gets its amount by an update after its insert,
-- in the creation's transaction (app.take_claim_amount, the one statement that sets amount_due):
-- its claim.created event, written by the insert and seen by nobody before the commit, is made
-- to tell the amount taken, not the price. It is the claim's first event, found by the claim's
-- index: left to choose, the plan read every event not fanned out yet for it (the fan-out's own
-- index, small when the table was last analyzed), a whole backlog on each creation.
create or replace function app.record_taken_amount() returns trigger
language plpgsql as $$
begin
  if new.status = 'awaiting_payment' then
    update app.events e
    set snapshot = (select app.claim_snapshot(to_jsonb(d)) from app.claim_details d where d.id = new.id)
    where e.id = (select min(f.id) from app.events f where f.claim_id = new.id)
      and e.type = 'claim.created' and not e.fanned_out;
  end if;
  return null;
end $$;

select app.define_trigger('app.claims', 'claims_created_events', $trigger$
  create or replace trigger claims_created_events after insert on app.claims
    referencing new table as new_claims
    for each statement execute function app.record_created_claims()$trigger$);
select app.define_trigger('app.claims', 'claims_changed_events', $trigger$
  create or replace trigger claims_changed_events after update on app.claims
    referencing old table as old_claims new table as new_claims
    for each statement execute function app.record_changed_claims()$trigger$);
-- A row trigger: a column list allows no transition table, and this update is of one claim.
select app.define_trigger('app.claims', 'claims_amount_taken_events', $trigger$
  create or replace trigger claims_amount_taken_events after update of amount_due on app.claims
    for each row execute function app.record_taken_amount()$trigger$);

create or replace function app.record_unmatched_transfers() returns trigger
language plpgsql as $$
begin
  insert into app.events (type, claim_id, ordering_key, snapshot)
  select 'payment.unmatched', n.claim_id,
    coalesce(n.claim_id, 'transfer:' || n.tx_hash || ':' || n.log_index),
    jsonb_build_object('tx_hash', n.tx_hash, 'log_index', n.log_index,
      'block_number', n.block_number::text, 'from_address', n.from_address,
      'value', n.value::text, 'reason', n.reason, 'claim_id', n.claim_id)
  from new_transfers n
  order by n.block_number, n.log_index;
  if found then
    perform pg_notify('pay_and_earn_events', '');
  end if;
  return null;
end $$;

select app.define_trigger('app.unmatched_transfers', 'unmatched_transfers_events', $trigger$
  create or replace trigger unmatched_transfers_events after insert on app.unmatched_transfers
    referencing new table as new_transfers
    for each statement execute function app.record_unmatched_transfers()$trigger$);
