-- A batch of claims born in a few statements instead of a loop of app.create_claim calls.
--
-- app.create_claims (0013) ran app.create_claim once per claim: five statements each, every
-- one started and ended by the executor, ~400 µs of PostgreSQL's CPU per claim, more than the
-- service's own work for the request (BENCHMARKS.md#claim-creation-in-postgresql). A batch whose payout
-- addresses are all different is now decided and written together:
--
-- 1. The same locks as before, taken first: the batch's, then every payout address's and
--    client's creation lock, in one order.
-- 2. One statement reads, for every claim, the open claim it asks for again (the reuse rule,
--    now app.claim_to_reuse for both functions) and its client's open claims; decides each claim's outcome; reserves
--    each created claim's first candidate amount; inserts the created claims; and answers them
--    all. Its snapshot is taken after the locks, as app.create_claim's reads are.
--    * The cap, in the batch's order: a client's k-th new claim of the batch opens if its open
--      claims plus k stay within the cap, as the loop's count of the claims it had opened did.
--      Reused claims open nothing and do not count.
--    * No claim of the batch can be the one another asks for again: their payout addresses
--      differ, and reuse asks for the same one.
-- 3. The rare claim whose first candidate was taken (by a claim of this batch, or by one still
--    holding it) takes the next free one, as app.create_claim does (app.take_claim_amount),
--    and is answered after. One difference from the loop, found in review: the batch's first
--    candidates are all reserved before any such claim looks further, so in a crowded space a
--    claim may find its later candidates taken by claims after it, and open at the price (paid
--    by its payout address, as any claim without a unique amount) where the loop would have
--    found it one. Amounts stay unique; it matters only in a space nearly full, or small next
--    to a batch.
--
-- A batch that names a payout address twice is created claim by claim, as before: the second
-- claim may ask for the one the first just opened, which only the loop's next statement sees.
--
-- The claims of a batch are inserted in its order, each created_at the clock's time at its
-- insert (0013), so a payout address's claims keep the order they were asked in.

-- The first free candidate amount for a claim that has none yet, set as its amount_due: a
-- candidate no reservation holds, or one held past held_until, taken over. Null if none is.
-- Not `on conflict do update ... where`, which locks the held row it does not update until
-- the transaction ends: two creations that tried each other's held amounts waited for each
-- other in a circle (a deadlock, seen with parallel requests and a crowded space). An update
-- locks only the row it changes.
create function app.take_claim_amount(
  claim_id text,
  amounts numeric[],
  amount_held_until timestamptz
)
returns numeric
language plpgsql
volatile
as $$
declare
  candidate numeric;
begin
  foreach candidate in array amounts loop
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
  end loop;
  return null;
end;
$$;

-- The open claim a creation asks for again (app.create_claim's reuse rule, 0012): the newest
-- open claim-flow claim of the same payout address, email and agent name, with no tx hash and
-- at least min_life_seconds of its life left. One SQL statement, inlined where it is called.
create function app.claim_to_reuse(
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

-- app.create_claim as in 0012, its reuse rule now app.claim_to_reuse and its loop
-- over the candidates app.take_claim_amount.
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
      values (amounts[1], create_claim.claim_id, amount_held_until)
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
    join app.claims c on c.id = b.id
    where jsonb_array_length(b.amounts) > 0 and c.amount_due = price
    order by b."position"
  loop
    perform app.take_claim_amount(short.id, short.amounts, short.held_until);
    return query
      select short."position", 'created'::text, d.* from app.claim_details d where d.id = short.id;
  end loop;
end;
$$;

-- Each statement of these functions finds its rows by an index on equality (the claim's id, its
-- payout address, its client, an amount), so one generic plan serves every call. Left to choose
-- (plan_cache_mode = auto), PostgreSQL planned the statements afresh on every call while the
-- claims table had no statistics (a new database, until autovacuum first analyzed it): a batch
-- of 8 claims with clients took 10-16 ms instead of 2.5 (BENCHMARKS.md#claim-creation-in-postgresql).
alter function app.create_claims(jsonb, integer, numeric, bigint)
  set plan_cache_mode = force_generic_plan;
alter function app.create_claim(text, text, text, text, text, text, bigint, integer, integer,
  numeric, timestamptz, timestamptz, numeric[])
  set plan_cache_mode = force_generic_plan;
alter function app.take_claim_amount(text, numeric[], timestamptz)
  set plan_cache_mode = force_generic_plan;
