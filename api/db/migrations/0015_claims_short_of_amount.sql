-- app.create_claims as in 0014 but for one statement: the one that finds the claims of a batch
-- created without their first candidate amount.
--
-- It joined the batch to app.claims (`join app.claims c on c.id = b.id where c.amount_due =
-- price`). Under the generic plan the function runs on (0014), that plan is made the first time
-- the statement runs in a session and kept until the table's statistics change. Made while the
-- claims table was small and had none (a new database, before autovacuum's first analyze), it
-- was a hash join over a sequential scan of every claim: one scan per batch that had a claim
-- short of its first candidate (most batches of 32 once 5% of the amount space is held). A new
-- database slowed from 59 to 353 µs of PostgreSQL's CPU a claim over its first 64,000 claims (BENCHMARKS.md#claim-creation-in-postgresql). Each claim's amount is now read by
-- a subquery on its id. The planner costs it for one claim at a time, where the primary key
-- beats a scan of any table larger than a few pages (and it takes a table never analyzed to be
-- ten pages at least): one index lookup per claim of the batch, not a scan of every claim.
--
-- PostgreSQL replaces a function whole, so the rest of it is restated unchanged; the generic
-- plans are set again, as `create or replace` clears what `alter function ... set` had set.

create or replace function app.create_claims(
  claims jsonb,
  lock_key integer,
  price numeric,
  batch_lock bigint
)
returns table (
  "position" integer,
  outcome text,
  id text,
  flow text,
  status text,
  payout_address text,
  agent_name text,
  has_email boolean,
  amount_due numeric,
  tx_hash text,
  tx_hash_signed boolean,
  created_at timestamptz,
  expires_at timestamptz,
  paid_at timestamptz,
  completed_at timestamptz,
  failure_reason text,
  payment_tx text,
  payment_log_index integer,
  payment_from text,
  payment_value numeric,
  matched_by text,
  payment_block bigint,
  payout_tx text
)
language plpgsql
volatile
as $$
#variable_conflict use_column
declare
  address_locks integer[];
  addressed integer;
  client_locks integer[];
  claim record;
  answered integer;
  short record;
begin
  -- One read of the batch for its locks, then the locks in one statement: unnest gives an
  -- array's elements in order, the addresses' before the clients'.
  select
    array_agg(distinct hashtext(c.payout_address) order by hashtext(c.payout_address))
      filter (where c.flow <> 'x402'),
    count(*) filter (where c.flow <> 'x402'),
    array_agg(distinct hashtext(c.client_key) order by hashtext(c.client_key))
      filter (where c.client_key is not null and c.cap > 0)
  into address_locks, addressed, client_locks
  from jsonb_to_recordset(claims) as c(flow text, payout_address text, client_key text, cap bigint);
  perform pg_advisory_xact_lock(batch_lock);
  perform pg_advisory_xact_lock(lock_key, lock_hash)
  from unnest(coalesce(address_locks, '{}') || coalesce(client_locks, '{}')) as lock_hash;

  -- A payout address named twice (or two whose hashes are equal): claim by claim. x402 claims
  -- are never asked for again, so theirs may repeat.
  if cardinality(address_locks) < addressed then
    for claim in
      select *
      from jsonb_to_recordset(claims) as c(
        "position" integer, id text, flow text, payout_address text, email text, agent_name text,
        client_key text, cap bigint, reuse_min_life_seconds integer, expires_at timestamptz,
        held_until timestamptz, amounts numeric[])
      order by c."position"
    loop
      return query
        select claim."position", created.*
        from app.create_claim(claim.id, claim.flow, claim.payout_address, claim.email,
          claim.agent_name, claim.client_key, claim.cap, claim.reuse_min_life_seconds, lock_key,
          price, claim.expires_at, claim.held_until, coalesce(claim.amounts, '{}')) as created;
    end loop;
    return;
  end if;

  return query
    with batch as (
      select b.*, coalesce(jsonb_array_length(b.amounts), 0) as candidates,
        (b.amounts ->> 0)::numeric as first_candidate, reused.id as reused_id,
        case when b.client_key is not null and b.cap > 0 then (
          select count(*) from app.claims c
          where c.client_key = b.client_key and c.status = 'awaiting_payment'
        ) end as open_count
      from jsonb_to_recordset(claims) as b(
        "position" integer, id text, flow text, payout_address text, email text, agent_name text,
        client_key text, cap bigint, reuse_min_life_seconds integer, expires_at timestamptz,
        held_until timestamptz, amounts jsonb)
      left join lateral app.claim_to_reuse(b.payout_address, b.email, b.agent_name,
        b.reuse_min_life_seconds) reused on b.reuse_min_life_seconds is not null
    ),
    decided as (
      select b.*,
        case
          when b.reused_id is not null then 'reused'
          when b.open_count is not null and b.open_count + row_number() over (
            partition by b.client_key, b.reused_id is null order by b."position") > b.cap
            then 'too_many_open_claims'
          else 'created'
        end as outcome
      from batch b
    ),
    reserved as (
      insert into app.amount_reservations (amount, claim_id, held_until)
      select d.first_candidate, d.id, d.held_until
      from decided d
      where d.outcome = 'created' and d.candidates > 0
      order by d."position"
      on conflict (amount) do nothing
      returning amount, claim_id
    ),
    inserted as (
      insert into app.claims as c
        (id, flow, payout_address, email, agent_name, amount_due, expires_at, client_key)
      select d.id, d.flow, d.payout_address, d.email, d.agent_name,
        coalesce(r.amount, price), d.expires_at, d.client_key
      from decided d
      left join reserved r on r.claim_id = d.id
      where d.outcome = 'created'
      order by d."position"
      returning c.*
    )
    -- Created with its amount (or with none asked for): the claim as inserted, unpaid.
    select d."position", d.outcome, c.id, c.flow, c.status, c.payout_address, c.agent_name,
      c.email is not null, c.amount_due, c.tx_hash, c.tx_hash_signed, c.created_at,
      c.expires_at, c.paid_at, c.completed_at, c.failure_reason, null::text, null::integer,
      null::text, null::numeric, null::text, null::bigint, null::text
    from decided d
    join inserted c on c.id = d.id
    where c.amount_due <> price or d.candidates = 0
    union all
    select d."position", d.outcome, r.*
    from decided d
    join app.claim_details r on r.id = d.reused_id
    where d.outcome = 'reused'
    union all
    select d."position", d.outcome, null, null, null, null, null, null, null, null, null, null,
      null, null, null, null, null, null, null, null, null, null, null
    from decided d
    where d.outcome = 'too_many_open_claims';

  -- Created without its first candidate (every claim not answered yet): the next free one,
  -- then the claim as it is now.
  get diagnostics answered = row_count;
  if answered = jsonb_array_length(claims) then
    return;
  end if;
  for short in
    select b."position", b.id, b.held_until,
      array(select jsonb_array_elements_text(b.amounts)::numeric) as amounts
    from jsonb_to_recordset(claims) as b(
      "position" integer, id text, held_until timestamptz, amounts jsonb)
    where jsonb_array_length(b.amounts) > 0
      -- A subquery per claim, by its id, never a join: see the head of this file.
      and (select c.amount_due from app.claims c where c.id = b.id) = price
    order by b."position"
  loop
    perform app.take_claim_amount(short.id, short.amounts, short.held_until);
    return query
      select short."position", 'created'::text, d.* from app.claim_details d where d.id = short.id;
  end loop;
end;
$$;

alter function app.create_claims(jsonb, integer, numeric, bigint)
  set plan_cache_mode = force_generic_plan;
