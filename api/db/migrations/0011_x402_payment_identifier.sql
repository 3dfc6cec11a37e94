-- The x402 payment-identifier extension: the client's idempotency id, per payer (a record only
-- exists once the facilitator verified the payer's signature, so nobody can take another
-- payer's id), and the fingerprint of the request it was first used with (payer, payout
-- address, email, agent name, the payment's terms). Same id and fingerprint: the first answer;
-- same id, another fingerprint: 409 payment_identifier_conflict.
alter table app.x402_payments add column payment_identifier text;
alter table app.x402_payments add column request_fingerprint text;

create unique index x402_payments_by_identifier on app.x402_payments (payer, payment_identifier)
  where payment_identifier is not null;
