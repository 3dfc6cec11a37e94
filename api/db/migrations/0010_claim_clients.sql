-- Who asked for a claim, so one client cannot hold more than OPEN_CLAIMS_PER_CLIENT open unpaid
-- claims (each of which, in variant A, holds a unique amount). A digest of the client's network
-- (an IPv4 address, an IPv6 /48, or a mail sender), never the address itself; null for claims
-- made before this column, by x402 (paid at creation) or by the service itself.
alter table app.claims add column client_key text;

create index claims_open_by_client on app.claims (client_key)
  where status = 'awaiting_payment' and client_key is not null;

-- The sweep of released reservations (api/lifecycle/expireClaims.ts) and the fill level read
-- held_until.
create index amount_reservations_by_held_until on app.amount_reservations (held_until);
