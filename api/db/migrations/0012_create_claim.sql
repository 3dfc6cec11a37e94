-- A claim as every surface reads it: the claim, the payment that paid it and its newest payout
-- (its live one, or the last that reverted or lost its nonce). api/claims/readClaim.ts reads
-- it, and app.create_claim answers with it; a column added here is added to both.
create view app.claim_details as
select c.id, c.flow, c.status, c.payout_address, c.agent_name, c.email is not null as has_email,
  c.amount_due, c.tx_hash, c.tx_hash_signed, c.created_at, c.expires_at, c.paid_at,
  c.completed_at, c.failure_reason,
  p.tx_hash as payment_tx, p.log_index as payment_log_index, p.from_address as payment_from,
  p.value as payment_value, p.matched_by, p.block_number as payment_block,
  po.tx_hash as payout_tx
from app.claims c
left join app.payments p on p.claim_id = c.id
left join lateral (
  select tx_hash from app.payouts where claim_id = c.id order by nonce desc limit 1
) po on true;

-- The birth of a claim (api/claims/insertClaim.ts), in one call instead of a round trip per
-- step. Each statement below takes its own snapshot (READ COMMITTED, a volatile function), so
-- what a statement reads after a lock includes everything committed by the lock's last holder.
--
-- 1. The payout address's creation lock (not for x402 claims, which are never given back), so
--    two identical requests at once cannot both miss the open claim and open two.
-- 2. With reuse_min_life_seconds: the open claim-flow claim this request asks for again (same
--    payout address, email and agent name, no tx hash), if that much of its life is left:
--    outcome 'reused', nothing written.
-- 3. With a client and a cap: the client's creation lock, then its open unpaid claims counted;
--    at the cap, outcome 'too_many_open_claims', nothing written.
-- 4. The claim, with its unique amount: the first of `amounts` (random candidates, tried in
--    order) that no reservation holds (none, or one past held_until). None free (the space is
--    full or flooded): the claim keeps the plain price and no reservation. A creation holds at
--    most one reservation row, the one it took, and waits for no other once it has it, so
--    creations never wait for each other in a circle.
--
-- The advisory locks are the same (key, hashtext(text)) pairs the service took before this
-- function, so a replica of either kind excludes the other. They are transaction locks: the
-- caller's transaction (or this statement's own) holds them until it ends.
create function app.create_claim(
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
  candidate numeric;
begin
  if claim_flow <> 'x402' then
    perform pg_advisory_xact_lock(lock_key, hashtext(claim_payout_address));
  end if;

  if reuse_min_life_seconds is not null then
    select c.id into found_id
    from app.claims c
    where c.payout_address = claim_payout_address
      and c.status = 'awaiting_payment' and c.flow = 'claim' and c.tx_hash is null
      and c.email is not distinct from claim_email
      and c.agent_name is not distinct from claim_agent_name
      and c.expires_at > now() + make_interval(secs => reuse_min_life_seconds)
    order by c.created_at desc
    limit 1;
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
      foreach candidate in array amounts loop
        insert into app.amount_reservations (amount, claim_id, held_until)
        values (candidate, create_claim.claim_id, amount_held_until)
        on conflict (amount) do nothing;
        if not found then
          -- Not `on conflict do update ... where`, which locks the held row it does not update
          -- until the transaction ends: two creations that tried each other's held amounts
          -- waited for each other in a circle (a deadlock, seen with parallel requests and a
          -- crowded space). An update locks only the row it changes.
          update app.amount_reservations r
          set claim_id = create_claim.claim_id, held_until = amount_held_until
          where r.amount = candidate and r.held_until < now();
        end if;
        if found then
          update app.claims c set amount_due = candidate where c.id = create_claim.claim_id;
          exit;
        end if;
      end loop;
    end if;
  end if;

  return query select 'created'::text, d.* from app.claim_details d where d.id = create_claim.claim_id;
end;
$$;
