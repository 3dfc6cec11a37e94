--! no-transaction
-- The x402 settlement watcher's other reads, every second (api/x402/watchSettlements.ts): the
-- records whose settlement's outcome is `unknown`, and the x402 payments not yet verified at
-- depth. Without these indexes each read every x402 record and every payment ever made, 1.8 and
-- 0.7 GB at a year; only the few in flight are in them (BENCHMARKS.md#a-year-of-traffic). The
-- first holds the records `settling` too, so it replaces 0030's. Built concurrently, so
-- payments are written meanwhile; a build interrupted before this migration was recorded left
-- an invalid index, dropped here before building again (docs/operating.md#migrations-at-size).
drop index concurrently if exists app.x402_payments_unsettled;
create index concurrently x402_payments_unsettled on app.x402_payments (updated_at) where status in ('settling', 'unknown');
drop index concurrently if exists app.x402_payments_settling;
drop index concurrently if exists app.payments_x402_unverified;
create index concurrently payments_x402_unverified on app.payments (block_number) where matched_by = 'x402' and verified_at is null;
