-- The service's own schema. Ponder's tables live in per-build schemas and are read only
-- through the views in `chain`; nothing the service writes goes anywhere but `app`.
comment on schema app is 'pay-and-earn service state (claims, payments, payouts, receipts, outbox)';
