-- Money paths that hold under reorgs, timeouts, races and foreign transactions (issue 9).

-- A transfer's identity survives a reorg that re-mines its transaction at another log index:
-- the same transaction, sender and value (the n-th such transfer of the transaction), and for
-- an EIP-3009 transfer its authorization. A transfer pays at most one claim by either.
alter table app.payments
  add column transfer_ordinal integer not null default 1 check (transfer_ordinal > 0),
  add column authorization_nonce text check (authorization_nonce ~ '^0x[0-9a-f]{64}$'),
  -- When the payment was seen again at CONFIRMATIONS depth (x402 settlements are recorded at
  -- one block, so that the answer to the request carries the payout).
  add column verified_at timestamptz;
create unique index payments_same_transfer
  on app.payments (tx_hash, from_address, value, transfer_ordinal);
create unique index payments_same_authorization
  on app.payments (from_address, authorization_nonce) where authorization_nonce is not null;

-- A tx hash attached with the sender's EIP-191 signature over the claim id.
alter table app.claims add column tx_hash_signed boolean not null default false;

-- The signed authorization of an x402 payment (its PAYMENT-SIGNATURE), kept to settle it again
-- if its settlement drops out of the chain; it can only ever pay pay_to, once.
alter table app.x402_payments add column payment_header text;
alter table app.x402_payments drop constraint x402_payments_status_check;
alter table app.x402_payments add constraint x402_payments_status_check
  check (status in ('settling', 'settled', 'failed', 'unknown', 'lost'));

-- Payouts: one row per signed nonce. A claim has at most one live payout (signed, broadcast or
-- mined successfully); a payout that reverted for a reason that passes, or whose nonce another
-- transaction took, stays as history and, once final, the claim gets a new payout.
alter table app.payout_attempts drop constraint payout_attempts_claim_id_fkey;
alter table app.payouts drop constraint payouts_pkey;
alter table app.payouts drop constraint payouts_nonce_key;
alter table app.payouts add primary key (nonce);
alter table app.payout_attempts
  add constraint payout_attempts_nonce_fkey foreign key (nonce) references app.payouts (nonce);
alter table app.payouts drop constraint payouts_status_check;
alter table app.payouts add constraint payouts_status_check
  check (status in ('signed', 'broadcast', 'confirmed', 'reverted', 'abandoned'));
create unique index payouts_one_live_per_claim on app.payouts (claim_id)
  where status in ('signed', 'broadcast', 'confirmed');
create index payouts_by_claim on app.payouts (claim_id);
alter table app.payouts
  add column block_hash text,
  -- PAYOUT_CONFIRMATIONS blocks deep: the watcher stops looking at it.
  add column final_at timestamptz,
  -- Why it reverted: 'recipient_blacklisted' fails the claim; anything else is retried.
  add column revert_reason text,
  -- A transaction that is none of its attempts used its nonce (needs a person).
  add column nonce_taken_at timestamptz;
create index payouts_unsettled on app.payouts (nonce)
  where status in ('confirmed', 'reverted') and final_at is null;

-- Zero-value transactions from the payout wallet to itself that fill a nonce somebody else
-- left empty (a foreign transaction that was dropped), so the payouts after it can be mined.
create table app.nonce_fillers (
  nonce bigint primary key,
  tx_hash text not null,
  raw_tx text not null,
  created_at timestamptz not null default now()
);

-- The block the matcher's cursor stands in, so a reorg of that block is noticed and the cursor
-- steps back instead of skipping the new block's transfers at lower log indexes.
alter table app.matcher_cursor add column block_hash text;
