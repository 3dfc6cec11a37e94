-- Several claims born in one call (api/claims/openClaims.ts): the creations a replica is asked
-- for in one turn of its event loop, in one statement and one transaction instead of one each.
-- A query's round trip (the socket write to PostgreSQL, its backend woken, the driver's work)
-- cost more than the creation itself (BENCHMARKS.md#claim-creation-in-postgresql).
--
-- `claims` is a JSON array of the arguments app.create_claim takes for each claim (its
-- `position` in the batch, id, flow, payout_address, email, agent_name, client_key, cap,
-- reuse_min_life_seconds, expires_at, held_until, amounts); each claim is then born exactly as
-- by itself, by app.create_claim, in the batch's order, and answered with its position.
--
-- Waits, and why none is a circle:
-- * One batch at a time (`batch_lock`, a transaction lock), whichever replica: a batch holds
--   every amount it reserved until it ends, and two batches could each wait for an amount the
--   other reserved and has not committed.
-- * Every creation lock the batch's claims take is taken first, the payout addresses' in one
--   order, then the clients': a single creation takes its address's and then its client's, so
--   the two never wait for each other's in a circle. app.create_claim takes them again, which
--   a transaction that holds them passes through.
-- * A single creation waits for at most one amount and holds none while it waits; the sweeper
--   of expired amounts skips the rows a creation holds (api/lifecycle/releaseReservations.ts).
--
-- created_at is the clock's time at the insert, not the transaction's start: the claims of a
-- batch keep the order they were asked in (the matcher pays a payout address's oldest first).
alter table app.claims alter column created_at set default clock_timestamp();

create function app.create_claims(
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
declare
  lock_hash integer;
  claim record;
begin
  perform pg_advisory_xact_lock(batch_lock);
  for lock_hash in
    select distinct hashtext(c.payout_address)
    from jsonb_to_recordset(claims) as c(flow text, payout_address text)
    where c.flow <> 'x402'
    order by 1
  loop
    perform pg_advisory_xact_lock(lock_key, lock_hash);
  end loop;
  for lock_hash in
    select distinct hashtext(c.client_key)
    from jsonb_to_recordset(claims) as c(client_key text, cap bigint)
    where c.client_key is not null and c.cap > 0
    order by 1
  loop
    perform pg_advisory_xact_lock(lock_key, lock_hash);
  end loop;

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
end;
$$;
