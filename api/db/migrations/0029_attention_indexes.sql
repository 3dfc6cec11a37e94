--! no-transaction
-- The attention counts' lookups (api/health/readAttention.ts, api/health/attentionChecked.ts):
-- the attempts of a payout's nonce, and the x402 settlements lost for good, read by a scan of
-- every attempt and every x402 record until now (BENCHMARKS.md#a-year-of-traffic). Built
-- concurrently, so payouts and x402 payments are written meanwhile; a build interrupted before
-- this migration was recorded left an invalid index, dropped here before building again
-- (docs/operating.md#migrations-at-size).
drop index concurrently if exists app.payout_attempts_by_nonce;
create index concurrently payout_attempts_by_nonce on app.payout_attempts (nonce);
drop index concurrently if exists app.x402_payments_lost;
create index concurrently x402_payments_lost on app.x402_payments (claim_id) where status = 'lost';
