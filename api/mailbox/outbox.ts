import type { Sql, Transaction } from "../db/connect.ts";

/**
 * `app.outbox`: every mail the service sends, queued in the transaction of the event it
 * reports, then sent by one sender loop (api/mail/mailSender.ts) with attempts, backoff and a
 * final `failed` state. The idempotency key makes one event one mail: the receipt of a claim
 * (`receipt_mail:<claim>`, queued by lifecycle/completeClaims.ts), the instructions of a mail
 * claim (`mail_instructions:<claim>`), the one reply to an inbound message
 * (`mail_reply:<message id>`); a unique index allows one answer per inbound message.
 *
 * The one writer of the table (ARCHITECTURE.md#one-writer-per-table): (new) → pending
 * (`queueMail`, `queueReceiptMails`) → sent (`markMailSent`), or pending again for a later
 * attempt, or failed for good (`markMailAttemptFailed`).
 */

export type MailKind = "receipt_mail" | "mail_instructions" | "mail_reply";

export interface MailToQueue {
  kind: MailKind;
  claimId: string | null;
  recipient: string;
  /** The inbound message this mail answers (its thread). */
  inReplyTo: string | null;
  /** What the mail says beyond the claim's own state (a refusal, a help text …). */
  payload: Record<string, unknown>;
  idempotencyKey: string;
}

/** Queues a mail once; false when this event (or an answer to this message) is queued already. */
export async function queueMail(transaction: Transaction, mail: MailToQueue): Promise<boolean> {
  const rows = await transaction`
    insert into app.outbox (kind, claim_id, recipient, in_reply_to, payload, idempotency_key)
    values (${mail.kind}, ${mail.claimId}, ${mail.recipient}, ${mail.inReplyTo},
      ${transaction.json(mail.payload as never)}, ${mail.idempotencyKey})
    on conflict do nothing
    returning 1`;
  return rows.length === 1;
}

/** A receipt mail, keyed by its claim (and its payout, once a receipt was signed again). */
export interface ReceiptMail {
  kind: "receipt_mail";
  claim_id: string;
  recipient: string;
  idempotency_key: string;
}

/**
 * Queues the receipt mails of a round of completions in one statement, in the completing
 * transaction (lifecycle/completeClaims.ts); a mail queued already is left as it is.
 */
export async function queueReceiptMails(
  transaction: Transaction,
  mails: ReceiptMail[],
): Promise<void> {
  if (mails.length === 0) return;
  await transaction`
    insert into app.outbox ${transaction(mails)}
    on conflict (idempotency_key) do nothing`;
}

export interface QueuedMail {
  id: bigint;
  kind: MailKind;
  claimId: string | null;
  recipient: string;
  inReplyTo: string | null;
  payload: Record<string, unknown>;
  attempts: number;
  /** When the inbound message this mail answers arrived (null when it answers none). */
  answersReceivedAt: Date | null;
}

interface QueuedRow {
  id: bigint;
  kind: MailKind;
  claim_id: string | null;
  recipient: string;
  in_reply_to: string | null;
  payload: Record<string, unknown>;
  attempts: number;
  answers_received_at: Date | null;
}

/**
 * The next mail due, locked for the caller's transaction (`skip locked`: another replica's
 * sender takes the next one), or null.
 */
export async function takeDueMail(transaction: Transaction): Promise<QueuedMail | null> {
  const [row] = await transaction<QueuedRow[]>`
    select o.id, o.kind, o.claim_id, o.recipient, o.in_reply_to, o.payload, o.attempts,
      (select m.received_at from app.mail_messages m where m.message_id = o.in_reply_to)
        as answers_received_at
    from app.outbox o
    where o.status = 'pending' and o.next_attempt_at <= now()
    order by o.next_attempt_at, o.id
    limit 1
    for update of o skip locked`;
  if (!row) return null;
  return {
    id: row.id,
    kind: row.kind,
    claimId: row.claim_id,
    recipient: row.recipient,
    inReplyTo: row.in_reply_to,
    payload: row.payload,
    attempts: row.attempts,
    answersReceivedAt: row.answers_received_at,
  };
}

export async function markMailSent(
  transaction: Transaction,
  id: bigint,
  messageId: string,
): Promise<void> {
  await transaction`
    update app.outbox
    set status = 'sent', sent_at = now(), message_id = ${messageId},
      attempts = attempts + 1, last_error = null
    where id = ${id}`;
}

/** A failed attempt: tried again at `retryInMs`, or failed for good when that is null. */
export async function markMailAttemptFailed(
  transaction: Transaction,
  id: bigint,
  failure: { error: string; retryInMs: number | null },
): Promise<void> {
  await transaction`
    update app.outbox
    set attempts = attempts + 1,
      last_error = ${failure.error.slice(0, 1_000)},
      status = ${failure.retryInMs === null ? "failed" : "pending"},
      failed_at = ${failure.retryInMs === null ? new Date() : null},
      next_attempt_at = now() + make_interval(secs => ${(failure.retryInMs ?? 0) / 1000})
    where id = ${id}`;
}

/** Milliseconds until the next pending mail is due (0: now), or null when none is pending. */
export async function nextMailDueInMs(sql: Sql): Promise<number | null> {
  const [row] = await sql<{ due_in: number | null }[]>`
    select greatest(0, extract(epoch from min(next_attempt_at) - now()) * 1000)::float8 as due_in
    from app.outbox where status = 'pending'`;
  return row?.due_in ?? null;
}

export interface ReplyBudgetUse {
  count: number;
  /** Seconds until the oldest of these replies leaves the hour's window (0 when none). */
  freesInSeconds: number;
}

/**
 * Replies (instructions and other answers) queued in the last hour: to this address, to this
 * organizational domain (the address's domain or any subdomain of it), and to all.
 */
export async function repliesInLastHour(
  sql: Sql,
  recipient: string,
  organizationalDomain: string,
): Promise<{ toRecipient: ReplyBudgetUse; toDomain: ReplyBudgetUse; overall: ReplyBudgetUse }> {
  const subdomains = `%.${organizationalDomain.replace(/[\\%_]/g, (c) => `\\${c}`)}`;
  const [row] = await sql<
    {
      to_recipient: number;
      recipient_frees: number | null;
      to_domain: number;
      domain_frees: number | null;
      overall: number;
      overall_frees: number | null;
    }[]
  >`
    with recent as (
      select lower(recipient) as recipient, lower(split_part(recipient, '@', 2)) as domain,
        created_at
      from app.outbox
      where kind in ('mail_instructions', 'mail_reply') and created_at > now() - interval '1 hour'
    ), marked as (
      select created_at, recipient = lower(${recipient}) as mine,
        (domain = ${organizationalDomain} or domain like ${subdomains}) as ours
      from recent
    )
    select
      count(*) filter (where mine)::int as to_recipient,
      extract(epoch from min(created_at) filter (where mine) + interval '1 hour' - now())::float8
        as recipient_frees,
      count(*) filter (where ours)::int as to_domain,
      extract(epoch from min(created_at) filter (where ours) + interval '1 hour' - now())::float8
        as domain_frees,
      count(*)::int as overall,
      extract(epoch from min(created_at) + interval '1 hour' - now())::float8 as overall_frees
    from marked`;
  const use = (count: number | undefined, frees: number | null | undefined) => ({
    count: count ?? 0,
    freesInSeconds: Math.max(0, Math.ceil(frees ?? 0)),
  });
  return {
    toRecipient: use(row?.to_recipient, row?.recipient_frees),
    toDomain: use(row?.to_domain, row?.domain_frees),
    overall: use(row?.overall, row?.overall_frees),
  };
}

/** True when this Message-ID is one the service sent (a mail of ours came back). */
export async function isOwnMessageId(sql: Sql, messageId: string): Promise<boolean> {
  const [row] = await sql`select 1 from app.outbox where message_id = ${messageId}`;
  return row !== undefined;
}

/** The Message-IDs the service sent in a claim's thread, oldest first (for References). */
export async function sentMessageIdsOfClaim(sql: Sql, claimId: string): Promise<string[]> {
  const rows = await sql<{ message_id: string }[]>`
    select message_id from app.outbox
    where claim_id = ${claimId} and message_id is not null
    order by sent_at, id`;
  return rows.map((row) => row.message_id);
}
