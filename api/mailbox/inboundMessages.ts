import type { Sql, Transaction } from "../db/connect.ts";
import { FINAL_CLAIM_STATUSES } from "../schemas/claimStatus.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";

/**
 * `app.mail_messages`: every inbound message, stored before anything acts on it (migration
 * 0012), and the queue the mail processor takes them from, oldest first, one at a time.
 *
 * The one writer of `app.mail_messages` and `app.mail_messages_pruned`
 * (ARCHITECTURE.md#one-writer-per-table): (new) → received (`storeInboundMessage`); received,
 * leased for a while (`leaseNextInbound`), delayed (`delayInbound`) or tried again
 * (`recordInboundFailure`); received → processed / ignored / rejected (`finishInbound`), or
 * rejected after its last attempt (`recordInboundFailure`); acted on → deleted and counted in
 * `mail_messages_pruned` (`pruneInboundMessages`).
 */

export type MailTransport = "smtp" | "imap";

export interface InboundToStore {
  /** The Message-ID as sent, or a digest of the bytes when there is none (see rawHeaders.ts). */
  messageId: string;
  transport: MailTransport;
  /** The whole message, or only its header block when it is over the size limit. */
  raw: Buffer;
  truncated: boolean;
  sizeBytes: number;
  /** SMTP only: MAIL FROM ('' for the null path <>), the client's address and HELO name. */
  envelopeFrom?: string | null;
  clientIp?: string | null;
  clientHelo?: string | null;
}

/**
 * Stores a message once: true when it is new, false when this Message-ID is already stored (a
 * redelivery). A new message wakes the mail processor on commit.
 */
export async function storeInboundMessage(sql: Sql, message: InboundToStore): Promise<boolean> {
  const rows = await sql`
    insert into app.mail_messages
      (message_id, transport, raw, truncated, size_bytes, envelope_from, client_ip, client_helo)
    values (${message.messageId}, ${message.transport}, ${message.raw}, ${message.truncated},
      ${message.sizeBytes}, ${message.envelopeFrom ?? null}, ${message.clientIp ?? null},
      ${message.clientHelo ?? null})
    on conflict (message_id) do nothing
    returning 1`;
  if (rows.length === 0) return false;
  await wakeWorker(sql, WAKE_CHANNELS.mailProcessor);
  return true;
}

export interface StoredInbound {
  messageId: string;
  transport: MailTransport;
  receivedAt: Date;
  raw: Buffer;
  truncated: boolean;
  sizeBytes: number;
  envelopeFrom: string | null;
  clientIp: string | null;
  clientHelo: string | null;
  attempts: number;
}

interface InboundRow {
  message_id: string;
  transport: MailTransport;
  received_at: Date;
  raw: Buffer;
  truncated: boolean;
  size_bytes: bigint;
  envelope_from: string | null;
  client_ip: string | null;
  client_helo: string | null;
  attempts: number;
}

function storedInbound(row: InboundRow): StoredInbound {
  return {
    messageId: row.message_id,
    transport: row.transport,
    receivedAt: row.received_at,
    raw: row.raw,
    truncated: row.truncated,
    sizeBytes: Number(row.size_bytes),
    envelopeFrom: row.envelope_from,
    clientIp: row.client_ip,
    clientHelo: row.client_helo,
    attempts: row.attempts,
  };
}

/**
 * Takes the oldest message waiting to be acted on for `leaseSeconds`: no other processor
 * takes it before then (it comes back by itself if this one dies). The sender checks then run
 * outside any transaction (they wait on DNS); `lockInbound` locks the row to act on it.
 */
export async function leaseNextInbound(
  sql: Sql,
  leaseSeconds: number,
): Promise<StoredInbound | null> {
  const [row] = await sql<InboundRow[]>`
    update app.mail_messages
    set next_attempt_at = now() + make_interval(secs => ${leaseSeconds})
    where message_id = (
      select message_id from app.mail_messages
      where status = 'received' and next_attempt_at <= now()
      order by next_attempt_at, received_at
      limit 1
      for update skip locked)
    returning message_id, transport, received_at, raw, truncated, size_bytes, envelope_from,
      client_ip, client_helo, attempts`;
  return row ? storedInbound(row) : null;
}

/**
 * The leased message, locked for the caller's transaction, or null when it was acted on
 * meanwhile (its lease ran out and another processor took it).
 */
export async function lockInbound(transaction: Transaction, messageId: string): Promise<boolean> {
  const [row] = await transaction`
    select 1 from app.mail_messages
    where message_id = ${messageId} and status = 'received'
    for update`;
  return row !== undefined;
}

export interface InboundVerdict {
  status: "processed" | "ignored" | "rejected";
  outcome: string;
  fromAddress: string | null;
  subject: string | null;
  claimId: string | null;
}

/**
 * Records the verdict. The message keeps only `keep` (its header block: the answers in its
 * thread need its Subject, Message-ID and References, never its body), so a stored body lives
 * no longer than its processing.
 */
export async function finishInbound(
  transaction: Transaction,
  messageId: string,
  verdict: InboundVerdict,
  keep: Buffer,
): Promise<void> {
  await transaction`
    update app.mail_messages
    set status = ${verdict.status}, outcome = ${verdict.outcome}, raw = ${keep},
      from_address = ${verdict.fromAddress}, subject = ${verdict.subject},
      claim_id = ${verdict.claimId}, processed_at = now(), last_error = null
    where message_id = ${messageId}`;
}

/**
 * A message that must wait (a reply budget is spent): tried again after `seconds`, its
 * attempts unchanged; `rate_limited` and the reason show meanwhile.
 */
export async function delayInbound(
  transaction: Transaction,
  messageId: string,
  delay: { seconds: number; why: string },
): Promise<void> {
  await transaction`
    update app.mail_messages
    set next_attempt_at = now() + make_interval(secs => ${delay.seconds}),
      outcome = 'rate_limited', last_error = ${delay.why}
    where message_id = ${messageId}`;
}

/**
 * A failed attempt at a message: tried again after a backoff, and given up (rejected,
 * `processing_failed`, never answered) after `maxAttempts`, so one poison message never
 * stops the intake. A sender check that ran out of time (`auth_timeout`) shows as the outcome
 * while the message waits for its next try too, so /metrics can count them; a later failure of
 * another kind clears it (the message then waits on the processor). Returns true when it was
 * given up.
 */
export async function recordInboundFailure(
  sql: Sql,
  messageId: string,
  error: string,
  maxAttempts: number,
  giveUpOutcome: "processing_failed" | "auth_timeout" = "processing_failed",
): Promise<boolean> {
  const waitingOutcome = giveUpOutcome === "auth_timeout" ? giveUpOutcome : null;
  const [row] = await sql<{ status: string }[]>`
    update app.mail_messages
    set attempts = attempts + 1,
      last_error = ${error.slice(0, 1_000)},
      next_attempt_at = now() + make_interval(secs => least(300, power(2, attempts + 1))),
      status = case when attempts + 1 >= ${maxAttempts} then 'rejected' else status end,
      outcome = case when attempts + 1 >= ${maxAttempts} then ${giveUpOutcome}
        when ${waitingOutcome}::text is not null or outcome = 'auth_timeout'
          then ${waitingOutcome}::text
        else outcome end,
      processed_at = case when attempts + 1 >= ${maxAttempts} then now() else processed_at end
    where message_id = ${messageId} and status = 'received'
    returning status`;
  return row?.status === "rejected";
}

/**
 * Deletes up to `batch` messages acted on more than `retentionDays` ago, except those of a
 * claim still open (its receipt mail answers in the message's thread). Returns how many.
 */
export async function pruneInboundMessages(
  sql: Sql,
  retentionDays: number,
  batch = 1_000,
): Promise<number> {
  // What is deleted is counted in the same statement (app.mail_messages_pruned), so the
  // totals /metrics shows never go down.
  const [row] = await sql<{ deleted: number }[]>`
    with deleted as (
      delete from app.mail_messages
      where message_id in (
        select m.message_id from app.mail_messages m
        left join app.claims c on c.id = m.claim_id
        where m.status <> 'received'
          and m.processed_at < now() - make_interval(days => ${retentionDays})
          and (m.claim_id is null or c.status = any(${[...FINAL_CLAIM_STATUSES]}::text[]))
        limit ${batch})
      returning status
    ), counted as (
      insert into app.mail_messages_pruned (status, count)
      select status, count(*) from deleted group by status
      on conflict (status) do update set count = app.mail_messages_pruned.count + excluded.count
    )
    select count(*)::int as deleted from deleted`;
  return row?.deleted ?? 0;
}

/** Where the thread of a mail claim starts: the message that created it. */
export async function originOfClaim(
  sql: Sql,
  claimId: string,
): Promise<{ messageId: string; subject: string | null } | null> {
  const [row] = await sql<{ message_id: string; subject: string | null }[]>`
    select message_id, subject from app.mail_messages
    where claim_id = ${claimId} and outcome = 'claim_created'
    order by received_at limit 1`;
  return row ? { messageId: row.message_id, subject: row.subject } : null;
}

/**
 * A mail claim created for this sender and payout address since `since` that no stored
 * message names: the claim of a message whose processing died between creating the claim and
 * recording it. Adopted instead of creating a second claim for the same message.
 */
export async function findUnrecordedMailClaim(
  sql: Sql,
  claim: { email: string; payoutAddress: string; since: Date },
): Promise<string | null> {
  const [row] = await sql<{ id: string }[]>`
    select c.id from app.claims c
    where c.flow = 'mail' and c.email = ${claim.email}
      and c.payout_address = ${claim.payoutAddress.toLowerCase()}
      and c.created_at >= ${claim.since}
      and not exists (select 1 from app.mail_messages m where m.claim_id = c.id)
    order by c.created_at
    limit 1`;
  return row?.id ?? null;
}

/** The claim's mail address, to check that a reply in its thread comes from it. */
export async function claimMailAddress(sql: Sql, claimId: string): Promise<string | null> {
  const [row] = await sql<{ email: string | null }[]>`
    select email from app.claims where id = ${claimId}`;
  return row?.email ?? null;
}

/** The subject and the header block of a stored message, to answer in its thread. */
export async function inboundHead(
  sql: Sql,
  messageId: string,
): Promise<{ subject: string | null; head: Buffer } | null> {
  const [row] = await sql<{ subject: string | null; head: Buffer }[]>`
    select subject, substring(raw from 1 for 65540) as head
    from app.mail_messages where message_id = ${messageId}`;
  return row ?? null;
}
