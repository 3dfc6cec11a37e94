-- Events (docs/events.md): what integrators are told when a claim changes, written by the
-- database in the transaction that makes the change, whichever module or function made it, so
-- that no transition can be committed without its event and no event without its transition.
-- The triggers that write app.events are in api/db/definitions/events.sql. Webhook endpoints and
-- their deliveries are written by api/webhooks/ alone.

create table app.events (
  -- Increasing; within one claim in the order of its changes (each change holds the claim's row
  -- lock until it commits). The SSE stream's event id, `Last-Event-ID` resumes after it.
  id bigint generated always as identity primary key,
  type text not null check (type in ('claim.created', 'claim.paid', 'claim.paying',
    'claim.completed', 'claim.expired', 'claim.failed', 'payment.unmatched')),
  claim_id text references app.claims (id),
  -- Deliveries of one key to one endpoint go out in order: the claim, or the transfer.
  ordering_key text not null,
  occurred_at timestamptz not null default now(),
  -- The claim (a row of app.claim_details) or the transfer as it was in that transaction, its
  -- numbers as text; the envelope's `data` is built from it (api/events/eventEnvelope.ts).
  snapshot jsonb not null,
  -- Turned into deliveries to the endpoints that want it (fanOutEvents in
  -- api/webhooks/webhookDeliveries.ts).
  fanned_out boolean not null default false
);
create index events_waiting_for_fan_out on app.events (id) where not fanned_out;
create index events_by_claim on app.events (claim_id, id) where claim_id is not null;

-- Where events are sent. `operator`: registered with `pay-and-earn webhooks add`, for the event
-- types it names (none: all); `claim`: a claim's `webhook_url`, for that claim's events;
-- `a2a`: an A2A task's push notification config, for the events of the claim its task names
-- (its claim_id, set once the task has created its claim: a config may come first).
create table app.webhook_endpoints (
  id text primary key,
  kind text not null check (kind in ('operator', 'claim', 'a2a')),
  url text not null,
  -- Standard Webhooks secret (whsec_ and base64); secret, never logged or shown again. An A2A
  -- config's is not used: its pushes carry the service's EIP-191 signature instead
  -- (docs/events.md#a2a-push-notifications).
  secret text not null,
  event_types text[] not null default '{}',
  claim_id text,
  -- A2A: the task and the config id the client chose, its token (sent back as
  -- X-A2A-Notification-Token) and its authentication (sent back as Authorization).
  task_id text,
  config_id text,
  token text,
  auth_scheme text,
  auth_credentials text,
  description text,
  created_at timestamptz not null default now(),
  -- Since when every delivery failed; null after a success.
  failing_since timestamptz,
  disabled_at timestamptz,
  disabled_reason text,
  check (kind <> 'operator' or claim_id is null),
  check (kind <> 'claim' or claim_id is not null),
  check ((kind = 'a2a') = (task_id is not null and config_id is not null))
);
create index webhook_endpoints_by_claim on app.webhook_endpoints (claim_id)
  where claim_id is not null;
create unique index webhook_endpoints_a2a_config on app.webhook_endpoints (task_id, config_id)
  where kind = 'a2a';

create table app.webhook_deliveries (
  id bigint generated always as identity primary key,
  event_id bigint not null references app.events (id),
  endpoint_id text not null references app.webhook_endpoints (id) on delete cascade,
  ordering_key text not null,
  -- pending: to send (at run_at); delivered: a 2xx came back; failed: given up (retries spent,
  -- or the endpoint disabled), until an operator redelivers it.
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
  attempts integer not null default 0,
  -- When it is due; 'infinity' while an earlier delivery of its line (endpoint and
  -- ordering_key) is pending, so that polls read heads of line only (api/webhooks/deliveryLines.ts).
  run_at timestamptz not null default now(),
  last_attempt_at timestamptz,
  last_status integer,
  last_error text,
  -- Sent again by an operator: the receiver sees the same webhook-id and a redelivery header.
  redelivery boolean not null default false,
  delivered_at timestamptz,
  unique (event_id, endpoint_id)
);
create index webhook_deliveries_due on app.webhook_deliveries (run_at) where status = 'pending';
create index webhook_deliveries_in_order on app.webhook_deliveries
  (endpoint_id, ordering_key, event_id) where status = 'pending';
create index webhook_deliveries_failed on app.webhook_deliveries (endpoint_id, id)
  where status = 'failed';
