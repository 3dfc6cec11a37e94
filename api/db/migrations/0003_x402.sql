-- x402 payments (DESIGN.md §8): the payer's EIP-3009 authorization, recorded with its claim
-- BEFORE settlement, so that a replay or a concurrent twin of the same payment finds it and
-- never settles or pays out twice, and the matcher can tell the settlement transfer apart.
create table app.x402_payments (
  payer text not null check (payer ~ '^0x[0-9a-f]{40}$'),
  nonce text not null check (nonce ~ '^0x[0-9a-f]{64}$'),
  claim_id text not null unique references app.claims (id),
  -- sha256 of the signed authorization and signature: a different payload reusing the nonce is not a replay.
  payload_digest text not null,
  status text not null default 'settling'
    check (status in ('settling', 'settled', 'failed', 'unknown')),
  settlement_tx text,
  failure_reason text,
  -- The PAYMENT-RESPONSE header sent with the answer, sent again on a replay.
  payment_response text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (payer, nonce)
);
