-- Receipts this service took back (docs/operating.md#payout-reorgs): the payout a receipt named
-- was undone by a reorg (re-mined as reverted: the claim goes back to `paying` and is paid by a
-- new payout), or another attempt of the same nonce was mined instead (the receipt is signed
-- again naming it). Kept word for word, so POST /api/receipts/verify can say what became of them.
create table app.withdrawn_receipts (
  id bigserial primary key,
  claim_id text not null references app.claims (id),
  message text not null,
  signature text not null,
  signer text not null,
  issued_at timestamptz not null,
  withdrawn_at timestamptz not null default now(),
  reason text not null check (reason in ('payout_undone', 'payout_replaced'))
);
create index withdrawn_receipts_by_claim on app.withdrawn_receipts (claim_id);

-- A nonce filler is re-priced like a payout: when its transaction was last signed, so one stuck
-- under a risen base fee is replaced at a higher fee after PAYOUT_REPLACE_AFTER_SECONDS.
alter table app.nonce_fillers add column signed_at timestamptz not null default now();
