--! no-transaction
-- The matcher's sender rule reads a sender's open claims and those that expired since the oldest
-- transfer of its batch (api/matcher/loadMatchingContext.ts). Open claims had their index;
-- expired ones, nine in ten claims after a year, were read by a scan of every claim
-- (BENCHMARKS.md#a-year-of-traffic). Built concurrently, so claims are written meanwhile; a build
-- interrupted before this migration was recorded left an invalid index, dropped here before
-- building again (docs/operating.md#migrations-at-size).
drop index concurrently if exists app.claims_expired_by_payout_address;
create index concurrently claims_expired_by_payout_address on app.claims
  (payout_address, expires_at) where status = 'expired';
