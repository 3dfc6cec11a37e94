-- Claims, the payments that pay them, their payouts and receipts (DESIGN.md §3).
-- Amounts are atomic USDC (6 decimals) in numeric(78,0); addresses and hashes lowercase hex.

create table app.claims (
  id text primary key,
  flow text not null check (flow in ('claim', 'x402', 'mail')),
  payout_address text not null check (payout_address ~ '^0x[0-9a-f]{40}$'),
  email text,
  agent_name text,
  amount_due numeric(78, 0) not null check (amount_due > 0),
  -- A transaction the client named as its payment (at creation or attached later).
  tx_hash text check (tx_hash ~ '^0x[0-9a-f]{64}$'),
  status text not null default 'awaiting_payment'
    check (status in ('awaiting_payment', 'paid', 'paying', 'completed', 'failed', 'expired')),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  paid_at timestamptz,
  completed_at timestamptz,
  failure_reason text
);

-- One transaction hash names at most one claim.
create unique index claims_tx_hash_unique on app.claims (tx_hash) where tx_hash is not null;
create index claims_open_by_payout_address on app.claims (payout_address, created_at)
  where status = 'awaiting_payment';
create index claims_by_status on app.claims (status, created_at);

-- Variant A: the exact amount each claim asks for, unique while held. A reservation outlives
-- its claim's expiry by a monitoring window so a late payment never pays somebody else.
create table app.amount_reservations (
  amount numeric(78, 0) primary key,
  claim_id text not null unique references app.claims (id),
  held_until timestamptz not null
);

-- One row per consumed incoming transfer. The primary key makes a transfer pay at most one
-- claim; the unique claim_id makes a claim paid by at most one transfer.
create table app.payments (
  tx_hash text not null,
  log_index integer not null,
  claim_id text not null unique references app.claims (id),
  block_number bigint not null,
  block_hash text not null,
  from_address text not null,
  value numeric(78, 0) not null,
  matched_by text not null check (matched_by in ('x402', 'tx_hash', 'amount', 'sender')),
  matched_at timestamptz not null default now(),
  primary key (tx_hash, log_index)
);

-- Confirmed transfers to pay_to that paid nothing, and why (SPEC: no refunds; visible).
create table app.unmatched_transfers (
  tx_hash text not null,
  log_index integer not null,
  block_number bigint not null,
  from_address text not null,
  value numeric(78, 0) not null,
  reason text not null
    check (reason in ('below_price', 'claim_expired', 'claim_already_paid', 'no_matching_claim')),
  -- The claim the transfer came closest to paying, when there is one (expired, already paid).
  claim_id text references app.claims (id),
  decided_at timestamptz not null default now(),
  primary key (tx_hash, log_index)
);

-- Where the matcher has got to in chain.incoming_transfer, by (block, log index).
create table app.matcher_cursor (
  id boolean primary key default true check (id),
  block_number bigint not null,
  log_index integer not null,
  updated_at timestamptz not null default now()
);
insert into app.matcher_cursor (block_number, log_index) values (-1, -1);

-- One payout per claim, enforced here. `tx_hash`/`raw_tx` are the attempt broadcast last;
-- every attempt for the nonce (the first and each same-nonce replacement) is in
-- payout_attempts, and any of them may be the one that is mined.
create table app.payouts (
  claim_id text primary key references app.claims (id),
  to_address text not null,
  amount numeric(78, 0) not null check (amount > 0),
  nonce bigint not null unique,
  tx_hash text not null,
  raw_tx text not null,
  status text not null default 'signed'
    check (status in ('signed', 'broadcast', 'confirmed', 'reverted')),
  broadcasts integer not null default 0,
  created_at timestamptz not null default now(),
  last_broadcast_at timestamptz,
  confirmed_at timestamptz,
  block_number bigint,
  last_error text
);
create index payouts_unfinished on app.payouts (nonce) where status in ('signed', 'broadcast');

create table app.payout_attempts (
  tx_hash text primary key,
  claim_id text not null references app.payouts (claim_id),
  nonce bigint not null,
  raw_tx text not null,
  max_fee_per_gas numeric(78, 0) not null,
  max_priority_fee_per_gas numeric(78, 0) not null,
  created_at timestamptz not null default now()
);
create index payout_attempts_by_claim on app.payout_attempts (claim_id);

create table app.receipts (
  claim_id text primary key references app.claims (id),
  message text not null,
  signature text not null,
  signer text not null,
  issued_at timestamptz not null
);

-- Mail to send (the sender is a later piece of work); queued in the same transaction as the
-- state change it reports, so nothing is announced that did not happen.
create table app.outbox (
  id bigserial primary key,
  kind text not null check (kind in ('receipt_mail')),
  claim_id text not null references app.claims (id),
  recipient text not null,
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  sent_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  unique (kind, claim_id)
);
create index outbox_due on app.outbox (next_attempt_at) where sent_at is null;
