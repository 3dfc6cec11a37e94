-- A claim as every surface reads it: the claim, the payment that paid it and its newest payout
-- (its live one, or the last that reverted or lost its nonce). api/claims/readClaim.ts reads
-- it, and app.create_claim and app.create_claims answer with it (claim_creation.sql): a column
-- added here is added to both, in the same place. `create or replace view` may only add columns
-- at the end; any other change drops the view first.
create or replace view app.claim_details as
select c.id, c.flow, c.status, c.payout_address, c.agent_name, c.email is not null as has_email,
  c.amount_due, c.tx_hash, c.tx_hash_signed, c.created_at, c.expires_at, c.paid_at,
  c.completed_at, c.failure_reason,
  p.tx_hash as payment_tx, p.log_index as payment_log_index, p.from_address as payment_from,
  p.value as payment_value, p.matched_by, p.block_number as payment_block,
  po.tx_hash as payout_tx
from app.claims c
left join app.payments p on p.claim_id = c.id
left join lateral (
  select tx_hash from app.payouts where claim_id = c.id order by nonce desc limit 1
) po on true;
