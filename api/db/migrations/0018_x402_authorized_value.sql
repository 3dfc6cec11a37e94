-- The value of the EIP-3009 authorization the service verified for each x402 claim. The payer
-- chooses the nonce and can spend it on another authorization of its own (a trifle, sent ahead
-- of the settlement): a transfer pays an x402 claim only if it is the verified authorization,
-- so its value is kept beside (payer, nonce) (DESIGN.md §12). Every authorization verified so
-- far was for exactly the price, 10 USDC: the terms accept no other amount.
alter table app.x402_payments add column authorized_value numeric(78, 0);
update app.x402_payments set authorized_value = 10000000 where authorized_value is null;
alter table app.x402_payments alter column authorized_value set not null;
alter table app.x402_payments add constraint x402_payments_authorized_value_positive
  check (authorized_value > 0);

-- Another use of an x402 claim's nonce stays unmatched, and says why.
alter table app.unmatched_transfers drop constraint unmatched_transfers_reason_check;
alter table app.unmatched_transfers add constraint unmatched_transfers_reason_check
  check (reason in ('below_price', 'claim_expired', 'claim_already_paid', 'no_matching_claim',
    'not_the_verified_authorization'));
