-- The mail flow (SPEC.md "What the service does" 3, "Events" 1): every inbound message is
-- stored here before anything acts on it, and every mail the service sends (the replies of
-- the mail flow, the receipt mail of every flow) goes through the outbox.

-- One row per inbound message, keyed by its Message-ID, so a redelivery (IMAP showing it
-- again, a retrying MTA, two replicas polling one mailbox) is the same row and is acted on once.
create table app.mail_messages (
  -- The Message-ID as sent (<…>), or <sha256 of the bytes@no-message-id.invalid> without one.
  message_id text primary key,
  transport text not null check (transport in ('smtp', 'imap')),
  received_at timestamptz not null default now(),
  -- The bytes as received, or only the header block when the message is over MAIL_MAX_BYTES.
  raw bytea not null,
  truncated boolean not null default false,
  size_bytes bigint not null,
  -- The SMTP envelope and connection, for SPF; null on IMAP ('' is the null path <>).
  envelope_from text,
  client_ip text,
  client_helo text,
  status text not null default 'received'
    check (status in ('received', 'processed', 'ignored', 'rejected')),
  -- processed: what was done (claim_created …); ignored, rejected: why (MAIL_REASONS).
  outcome text,
  from_address text,
  subject text,
  -- The claim the message created or replied about.
  claim_id text references app.claims (id),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  last_error text,
  processed_at timestamptz
);
create index mail_messages_waiting on app.mail_messages (next_attempt_at)
  where status = 'received';
create index mail_messages_by_claim on app.mail_messages (claim_id) where claim_id is not null;

-- The outbox: kinds for the mail flow, an idempotency key per event (the receipt of a claim,
-- the instructions of a claim, the one reply to an inbound message), a final `failed` state.
alter table app.outbox drop constraint outbox_kind_check;
alter table app.outbox add constraint outbox_kind_check
  check (kind in ('receipt_mail', 'mail_instructions', 'mail_reply'));
alter table app.outbox drop constraint outbox_kind_claim_id_key;
alter table app.outbox alter column claim_id drop not null;
alter table app.outbox add column idempotency_key text;
update app.outbox set idempotency_key = kind || ':' || claim_id;
alter table app.outbox alter column idempotency_key set not null;
alter table app.outbox add constraint outbox_idempotency_key_key unique (idempotency_key);
alter table app.outbox add column status text not null default 'pending'
  check (status in ('pending', 'sent', 'failed'));
update app.outbox set status = 'sent' where sent_at is not null;
alter table app.outbox add column failed_at timestamptz;
-- The inbound message this mail answers (threading), and what the answer says.
alter table app.outbox add column in_reply_to text references app.mail_messages (message_id);
alter table app.outbox add column payload jsonb not null default '{}';
-- Our own Message-ID, set when the mail is sent (a mail that comes back is recognised by it).
alter table app.outbox add column message_id text unique;
-- At most one answer to any inbound message, whatever happens.
create unique index outbox_one_answer on app.outbox (in_reply_to)
  where kind in ('mail_instructions', 'mail_reply');
drop index app.outbox_due;
create index outbox_due on app.outbox (next_attempt_at) where status = 'pending';
-- Replies per sender and overall in the last hour (the reply rate limits).
create index outbox_replies_by_recipient on app.outbox (lower(recipient), created_at)
  where kind in ('mail_instructions', 'mail_reply');
create index outbox_failed on app.outbox (failed_at) where status = 'failed';

-- Wake the sender in whichever process runs it, whoever queues a mail (completing a claim
-- queues its receipt mail): delivered on commit.
create function app.wake_mail_sender() returns trigger language plpgsql as $$
begin
  perform pg_notify('pay_and_earn_outbox', '');
  return null;
end $$;
create trigger outbox_wakes_sender after insert on app.outbox
  for each statement execute function app.wake_mail_sender();

-- The intake's last sign of life per transport (the SMTP listener while it listens, the IMAP
-- poller after each successful poll), for /api/health on every replica.
create table app.mail_intake (
  transport text primary key check (transport in ('smtp', 'imap')),
  last_ok_at timestamptz,
  last_error text,
  last_error_at timestamptz
);
