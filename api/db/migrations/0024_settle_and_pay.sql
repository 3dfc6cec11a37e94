-- One-transaction settlement (docs/payments.md#one-transaction-settlement): with the local
-- facilitator and SETTLE_AND_PAY_ADDRESS, an x402 authorization is settled by the payout
-- sender in the same transaction as its payout.

-- The authorization waits for the payout sender (status 'settling'), instead of the
-- facilitator settling it first.
-- (Not indexed: read by status as recordStaleSettlingsUnknown already is; an index on a
-- filled table needs `create index concurrently`, which a migration's transaction cannot run.)
alter table app.x402_payments add column settle_with_payout boolean not null default false;

-- The payout transaction also settles its claim's authorization: mined successfully, it is the
-- claim's payment too; reverted, neither leg happened.
alter table app.payouts add column settles_x402 boolean not null default false;
