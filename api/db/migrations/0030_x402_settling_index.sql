--! no-transaction
-- The x402 settlement watcher's look for records left `settling` by a process that died
-- (api/lifecycle/x402Records.ts, recordStaleSettlingsUnknown), every second: without an index it
-- read every x402 record ever made, 1.8 GB at a year (BENCHMARKS.md#a-year-of-traffic). Only
-- the few records being settled are in this one. Built concurrently, so x402 payments are
-- written meanwhile; a build interrupted before this migration was recorded left an invalid
-- index, dropped here before building again (docs/operating.md#migrations-at-size).
drop index concurrently if exists app.x402_payments_settling;
create index concurrently x402_payments_settling on app.x402_payments (updated_at) where status = 'settling';
