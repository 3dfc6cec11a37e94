-- The birth of claims (api/claims/insertClaim.ts for one, api/claims/openClaims.ts for the
-- creations a replica is asked for in one turn of its event loop), in one call instead of a
-- round trip per step: a query's round trip costs more than the creation itself
-- (BENCHMARKS.md#claim-creation-in-postgresql).
--
-- app.create_claim, one claim. Each statement takes its own snapshot (READ COMMITTED, a
-- volatile function), so what a statement reads after a lock includes everything committed by
-- the lock's last holder (docs/traps.md#postgresql).
-- 1. The payout address's creation lock (not for x402 claims, which are never given back), so
--    two identical requests at once cannot both miss the open claim and open two.
-- 2. With reuse_min_life_seconds: the open claim-flow claim this request asks for again
--    (app.claim_to_reuse), if that much of its life is left: outcome 'reused', nothing written.
-- 3. With a client and a cap: the client's creation lock, then its open unpaid claims counted;
--    at the cap, outcome 'too_many_open_claims', nothing written.
-- 4. The claim, with its unique amount: one of `amounts` (random candidates) that no
--    reservation holds (none, or one past held_until). None free (the space is
--    full or flooded): the claim keeps the plain price and no reservation. A creation holds at
--    most one reservation row, the one it took, and waits for no other once it has it, so
--    creations never wait for each other in a circle.
-- The advisory locks are (key, hashtext(text)) pairs, transaction locks: the caller's
-- transaction (or this statement's own) holds them until it ends.
--
-- app.create_claims, a batch: `claims` is a JSON array of the arguments app.create_claim takes
-- for each claim (its `position` in the batch, id, flow, payout_address, email, agent_name,
-- client_key, cap, reuse_min_life_seconds, expires_at, held_until, amounts), answered with its
-- position, each claim born as by itself. Waits, and why none is a circle:
-- * One batch at a time (`batch_lock`, a transaction lock), whichever replica: a batch holds
--   every amount it reserved until it ends, and two batches could each wait for an amount the
--   other reserved and has not committed.
-- * Every creation lock the batch's claims take is taken first, the payout addresses' in one
--   order, then the clients': a single creation takes its address's and then its client's, so
--   the two never wait for each other's in a circle. app.create_claim takes them again, which
--   a transaction that holds them passes through.
-- * A single creation waits for at most one amount and holds none while it waits; the sweeper
--   of expired amounts skips the rows a creation holds (api/lifecycle/releaseReservations.ts).
-- A batch whose payout addresses all differ is decided and written in a few statements, not a
-- loop of app.create_claim calls (one call cost ~400 µs of PostgreSQL's CPU a claim):
-- 1. One statement reads, for every claim, the open claim it asks for again and its client's
--    open claims; decides each claim's outcome; reserves each created claim's first free
--    candidate amount (app.free_claim_amounts); inserts the created claims; and answers them
--    all. Its snapshot is taken after the locks, as app.create_claim's reads are.
--    * The cap, in the batch's order: a client's k-th new claim of the batch opens if its open
--      claims plus k stay within the cap. Reused claims open nothing and do not count.
--    * No claim of the batch can be the one another asks for again: their payout addresses
--      differ, and reuse asks for the same one.
-- 2. The rare claim whose first free candidate was taken (by a claim of this batch, by a
--    creation not committed when it was read, or held past held_until, which only an update
--    takes over) takes the next free one (app.take_claim_amount), and is answered after. The
--    batch's first free candidates are all reserved before any such claim looks further, so in
--    a crowded space a claim may find its later candidates taken by claims after it, and open at
--    the price (paid by its payout address, as any claim without a unique amount) where a loop
--    would have found it one. Amounts stay unique; it matters only in a space nearly full, or
--    small next to a batch.
-- A batch that names a payout address twice is created claim by claim: the second claim may
-- ask for the one the first just opened, which only the loop's next statement sees. The claims
-- of a batch are inserted in its order, each created_at the clock's time at its insert (the
-- column's default), so a payout address's claims keep the order they were asked in.
--
-- Plans (docs/traps.md#postgresql). Every statement here finds its rows by an index on equality
-- (a claim's id, its payout address, its client, an amount), so the functions run on one
-- generic plan (`plan_cache_mode = force_generic_plan`): left to choose, PostgreSQL planned them
-- afresh on every call while the claims table had no statistics, at several times the cost.
-- A generic plan is made once per session on the table as it is then and kept until its
-- statistics change, so no statement joins the batch to app.claims (a plan made on a small
-- table turned that join into a scan of every claim, kept while the table grew): each claim is
-- read by a subquery on its id. And as a plan made right after an analyze of a few rows may
-- still prefer a one-page scan to any index, sequential scans are off for these functions
-- (`enable_seqscan = off`); nothing else in the database is affected. The settings are part of
-- each `create or replace`, which replaces what an earlier definition set.

-- The candidates that no reservation holds now (none, or one past held_until). One SQL
-- statement, inlined where it is called, which takes the first found (`limit 1`): an index
-- lookup by amount per candidate, up to the first free one. In no promised order, and none is
-- needed: the candidates are random, and any free one is as good as the first.
create or replace function app.free_claim_amounts(amounts numeric[])
returns table (amount numeric)
language sql
stable
as $$
  select u.amount
  from unnest(amounts) as u(amount)
  where not exists (
    select from app.amount_reservations r
    where r.amount = u.amount and r.held_until >= now())
$$;

-- The first free candidate amount for a claim that has none yet, set as its amount_due: a
-- candidate no reservation holds, or one held past held_until, taken over. Null if none is.
-- Which candidates are free is read in one statement (app.free_claim_amounts), not tried one by
-- one: in a space 95% held, as a year of 10 million claims holds it, a claim's first free
-- candidate is about its twentieth, and trying each cost two statements
-- (BENCHMARKS.md#a-year-of-traffic). A candidate read as free can still be taken first (by a
-- creation not committed when the read was made): the insert then waits for it and finds it
-- taken, and the free candidates are read again without it.
-- Not `on conflict do update ... where`, which locks the held row it does not update until
-- the transaction ends: two creations that tried each other's held amounts waited for each
-- other in a circle (a deadlock, seen with parallel requests and a crowded space). An update
-- locks only the row it changes.
create or replace function app.take_claim_amount(
  claim_id text,
  amounts numeric[],
  amount_held_until timestamptz
)
returns numeric
language plpgsql
volatile
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
declare
  candidate numeric;
begin
  loop
    select f.amount into candidate from app.free_claim_amounts(amounts) f limit 1;
    if not found then
      return null;
    end if;
    insert into app.amount_reservations (amount, claim_id, held_until)
    values (candidate, take_claim_amount.claim_id, amount_held_until)
    on conflict (amount) do nothing;
    if not found then
      update app.amount_reservations r
      set claim_id = take_claim_amount.claim_id, held_until = amount_held_until
      where r.amount = candidate and r.held_until < now();
    end if;
    if found then
      update app.claims c set amount_due = candidate where c.id = take_claim_amount.claim_id;
      return candidate;
    end if;
    amounts := array_remove(amounts, candidate);
  end loop;
end;
$$;

-- The open claim a creation asks for again: the newest open claim-flow claim of the same payout
-- address, email and agent name, with no tx hash and at least min_life_seconds of its life
-- left. One SQL statement, inlined where it is called.
create or replace function app.claim_to_reuse(
  wanted_payout_address text,
  wanted_email text,
  wanted_agent_name text,
  min_life_seconds integer
)
returns table (id text)
language sql
stable
as $$
  select c.id
  from app.claims c
  where c.payout_address = wanted_payout_address
    and c.status = 'awaiting_payment' and c.flow = 'claim' and c.tx_hash is null
    and c.email is not distinct from wanted_email
    and c.agent_name is not distinct from wanted_agent_name
    and c.expires_at > now() + make_interval(secs => min_life_seconds)
  order by c.created_at desc
  limit 1
$$;

create or replace function app.create_claim(
  claim_id text,
  claim_flow text,
  claim_payout_address text,
  claim_email text,
  claim_agent_name text,
  claim_client_key text,
  open_claims_cap bigint,
  reuse_min_life_seconds integer,
  lock_key integer,
  price numeric,
  claim_expires_at timestamptz,
  amount_held_until timestamptz,
  amounts numeric[]
)
returns table (
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
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  found_id text;
  open_count integer;
  first_amount numeric;
begin
  if claim_flow <> 'x402' then
    perform pg_advisory_xact_lock(lock_key, hashtext(claim_payout_address));
  end if;

  if reuse_min_life_seconds is not null then
    select r.id into found_id
    from app.claim_to_reuse(claim_payout_address, claim_email, claim_agent_name,
      reuse_min_life_seconds) r;
    if found_id is not null then
      return query select 'reused'::text, d.* from app.claim_details d where d.id = found_id;
      return;
    end if;
  end if;

  if claim_client_key is not null and open_claims_cap > 0 then
    perform pg_advisory_xact_lock(lock_key, hashtext(claim_client_key));
    select count(*)::integer into open_count
    from app.claims c
    where c.client_key = claim_client_key and c.status = 'awaiting_payment';
    if open_count >= open_claims_cap then
      outcome := 'too_many_open_claims';
      return next;
      return;
    end if;
  end if;

  if cardinality(amounts) = 0 then
    insert into app.claims
      (id, flow, payout_address, email, agent_name, amount_due, expires_at, client_key)
    values (claim_id, claim_flow, claim_payout_address, claim_email, claim_agent_name, price,
      claim_expires_at, claim_client_key);
  else
    -- The first candidate is reserved by the claim's own insert, so that in a space far from
    -- full (the common case) the claim is written once, with its amount. The reservation's
    -- foreign key is checked at the end of the statement, when the claim is there.
    with reserved as (
      insert into app.amount_reservations (amount, claim_id, held_until)
      select f.amount, create_claim.claim_id, amount_held_until
      from app.free_claim_amounts(amounts) f
      limit 1
      on conflict (amount) do nothing
      returning amount
    )
    insert into app.claims as c
      (id, flow, payout_address, email, agent_name, amount_due, expires_at, client_key)
    select create_claim.claim_id, claim_flow, claim_payout_address, claim_email,
      claim_agent_name, coalesce((select r.amount from reserved r), price), claim_expires_at,
      claim_client_key
    returning c.amount_due into first_amount;

    -- Taken (or past held_until, which only an update takes over): the candidates in turn.
    if first_amount = price then
      perform app.take_claim_amount(claim_id, amounts, amount_held_until);
    end if;
  end if;

  return query select 'created'::text, d.* from app.claim_details d where d.id = create_claim.claim_id;
end;
$$;

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
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
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
      select b.*, coalesce(cardinality(b.amounts), 0) as candidates,
        -- Its argument a plain column, so that the function is inlined and stops at the first
        -- free candidate (a subquery there would have it run whole, every candidate read).
        (select f.amount from app.free_claim_amounts(b.amounts) f limit 1) as first_candidate,
        reused.id as reused_id,
        case when b.client_key is not null and b.cap > 0 then (
          select count(*) from app.claims c
          where c.client_key = b.client_key and c.status = 'awaiting_payment'
        ) end as open_count
      from jsonb_to_recordset(claims) as b(
        "position" integer, id text, flow text, payout_address text, email text, agent_name text,
        client_key text, cap bigint, reuse_min_life_seconds integer, expires_at timestamptz,
        held_until timestamptz, amounts numeric[])
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
      where d.outcome = 'created' and d.first_candidate is not null
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
