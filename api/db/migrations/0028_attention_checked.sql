-- What the health check's attention counts (api/health/readAttention.ts) have found settled for
-- good, so that each count reads only what can still need attention instead of every payout,
-- attempt, payment and indexed transfer, which took seconds at a year's size
-- (BENCHMARKS.md#a-year-of-traffic). Kept by the attention-check worker
-- (api/health/attentionChecked.ts); why a row behind a mark can never need attention again is
-- in docs/operating.md#attention-checked-through. New tables: nothing to lock.
create table if not exists app.attention_checked (
  only_row boolean primary key default true check (only_row),
  -- The indexer's tables behind the `chain` views when the marks were set, by schema and
  -- pg_class oid (api/chain/indexerSchema.ts): their rows at or below Ponder's finalized block
  -- never change, and a re-index (into another schema, or into the same one dropped and made
  -- again: new oids) starts again.
  indexer_tables text not null,
  -- The indexer's outgoing transfers checked, by position (block, log index).
  transfers_through_block numeric(78, 0) not null,
  transfers_through_log integer not null,
  -- The payouts checked for payout_missing_on_chain, by nonce; null before the first.
  payouts_through_nonce bigint,
  -- CONFIRMATIONS when payments_through_nonce was set: payout_without_payment's depth.
  payments_confirmations integer not null,
  -- The payouts checked for payout_without_payment, by nonce; null before the first.
  payments_through_nonce bigint,
  checked_at timestamptz not null default now()
);

-- Rows behind the marks that were not settled for good when passed: counted afresh on every
-- read, for `reason` (a health reason). key: a transfer's "tx_hash:log_index" for
-- payout_wallet_foreign_transfer, a claim id for claim_paid_twice, a payout's nonce for
-- payout_missing_on_chain and payout_without_payment.
create table if not exists app.attention_held (
  reason text not null check (reason in ('payout_wallet_foreign_transfer', 'claim_paid_twice',
    'payout_missing_on_chain', 'payout_without_payment')),
  key text not null,
  primary key (reason, key)
);
