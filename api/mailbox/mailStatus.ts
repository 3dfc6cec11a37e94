import type { Sql } from "../db/connect.ts";
import { keptCount, readRowCounts } from "../db/rowCounts.ts";
import type { MailTransport } from "./inboundMessages.ts";

/**
 * How the mail parts stand, from the database, so every replica reports the same: the
 * intake's last sign of life (`app.mail_intake`), the outbox's backlog and failures, and the
 * counts /metrics exposes. The one writer of `app.mail_intake`
 * (ARCHITECTURE.md#one-writer-per-table): one row per transport, upserted alive
 * (`recordIntakeAlive`) or with its last error (`recordIntakeError`).
 */

/** The SMTP listener while it listens, the IMAP poller after each successful poll. */
export async function recordIntakeAlive(sql: Sql, transport: MailTransport): Promise<void> {
  await sql`
    insert into app.mail_intake (transport, last_ok_at) values (${transport}, now())
    on conflict (transport) do update set last_ok_at = now()`;
}

export async function recordIntakeError(
  sql: Sql,
  transport: MailTransport,
  error: string,
): Promise<void> {
  await sql`
    insert into app.mail_intake (transport, last_error, last_error_at)
    values (${transport}, ${error.slice(0, 500)}, now())
    on conflict (transport) do update
    set last_error = excluded.last_error, last_error_at = excluded.last_error_at`;
}

export interface IntakeStatus {
  transport: MailTransport;
  lastOkAt: Date | null;
  /** Whole seconds since the last sign of life; null when there never was one. */
  lastOkSeconds: number | null;
  lastError: string | null;
  lastErrorAt: Date | null;
}

export interface OutboxStatus {
  pending: number;
  /** Whole seconds the oldest pending mail has waited since it was queued; null when none. */
  oldestPendingSeconds: number | null;
  failed: number;
  failedLastDay: number;
}

export async function readIntakeStatus(sql: Sql, transport: MailTransport): Promise<IntakeStatus> {
  const [row] = await sql<
    {
      last_ok_at: Date | null;
      age: number | null;
      last_error: string | null;
      last_error_at: Date | null;
    }[]
  >`
    select last_ok_at, extract(epoch from now() - last_ok_at)::float8 as age,
      last_error, last_error_at
    from app.mail_intake where transport = ${transport}`;
  return {
    transport,
    lastOkAt: row?.last_ok_at ?? null,
    lastOkSeconds: row?.age == null ? null : Math.max(0, Math.floor(row.age)),
    lastError: row?.last_error ?? null,
    lastErrorAt: row?.last_error_at ?? null,
  };
}

/**
 * The outbox's pending and failed mail, each by its partial index (`outbox_due`,
 * `outbox_failed`): the outbox keeps every mail sent, so a count over the whole table grew with
 * every mail ever sent, on every health check (BENCHMARKS.md#a-year-of-traffic).
 */
export async function readOutboxStatus(sql: Sql): Promise<OutboxStatus> {
  const [row] = await sql<
    { pending: number; oldest: number | null; failed: number; failed_last_day: number }[]
  >`
    select pending.count as pending, pending.oldest, failed.count as failed,
      failed.last_day as failed_last_day
    from (
      select count(*)::int as count,
        extract(epoch from now() - min(created_at))::float8 as oldest
      from app.outbox where status = 'pending'
    ) pending, (
      select count(*)::int as count,
        count(*) filter (where failed_at > now() - interval '1 day')::int as last_day
      from app.outbox where status = 'failed'
    ) failed`;
  return {
    pending: row?.pending ?? 0,
    oldestPendingSeconds: row?.oldest == null ? null : Math.max(0, Math.floor(row.oldest)),
    failed: row?.failed ?? 0,
    failedLastDay: row?.failed_last_day ?? 0,
  };
}

/** Stored inbound messages with one status and outcome (outcome null: not acted on yet). */
export interface InboundByOutcome {
  status: string;
  outcome: string | null;
  count: number;
}

/**
 * Mails in and out, counted from the tables; inbound rows deleted by retention are counted in
 * app.mail_messages_pruned, so the totals only ever grow.
 */
export interface MailCounts {
  /** Inbound messages stored. */
  received: number;
  /** Inbound messages never answered: automatic, loops (ignored) … */
  ignored: number;
  /** … and unauthenticated, rate limited, unreadable beyond reply (rejected). */
  rejected: number;
  /** Answers to inbound messages sent (instructions and replies). */
  replied: number;
  /** Every mail sent (answers and receipt mails). */
  sent: number;
  /** Mails given up after their last attempt. */
  failed: number;
  /** The stored inbound messages by status and outcome: why each was refused, what waits. */
  inboundByOutcome: InboundByOutcome[];
  /** Inbound messages not acted on yet (waiting for the processor, a budget or a retry). */
  inboundWaiting: number;
  /** Whole seconds since the oldest of those came; null when none waits. */
  oldestInboundWaitingSeconds: number | null;
}

/**
 * The mail counts /metrics shows. The sent, replied and failed mails and the inbound messages,
 * kept and pruned, are read from the counts the triggers keep, in one statement (a few rows,
 * however many mails: api/db/rowCounts.ts); until the row-counts worker has counted every row
 * once after migration 0032, counted afresh. The messages waiting are few (the processor's queue,
 * by its partial index `mail_messages_waiting`).
 */
export async function readMailCounts(sql: Sql): Promise<MailCounts> {
  const [kept, [waiting]] = await Promise.all([
    readRowCounts(sql, ["outbox", "mail_messages", "mail_messages_pruned"]),
    sql<{ waiting: number; oldest: number | null }[]>`
      select count(*)::int as waiting,
        extract(epoch from now() - min(received_at))::float8 as oldest
      from app.mail_messages where status = 'received'`,
  ]);
  const { inbound, pruned, outbound } = kept
    ? {
        inbound: kept
          .filter((row) => row.counted === "mail_messages" && row.count !== 0)
          .map((row) => ({ status: row.label, outcome: row.detail, count: row.count })),
        pruned: kept
          .filter((row) => row.counted === "mail_messages_pruned")
          .map((row) => ({ status: row.label, count: row.count })),
        outbound: {
          replied: keptCount(kept, "outbox", "replied"),
          sent: keptCount(kept, "outbox", "sent"),
          failed: keptCount(kept, "outbox", "failed"),
        },
      }
    : await countMails(sql);
  // Kept and pruned alike, read together: these are counters, and must never go down.
  const total = (status?: string) =>
    [...inbound, ...pruned]
      .filter((row) => status === undefined || row.status === status)
      .reduce((sum, row) => sum + row.count, 0);
  return {
    received: total(),
    ignored: total("ignored"),
    rejected: total("rejected"),
    replied: outbound.replied,
    sent: outbound.sent,
    failed: outbound.failed,
    inboundByOutcome: inbound,
    inboundWaiting: waiting?.waiting ?? 0,
    oldestInboundWaitingSeconds:
      waiting?.oldest == null ? null : Math.max(0, Math.floor(waiting.oldest)),
  };
}

/** The mails counted over the tables: the inbound ones kept and pruned in one statement. */
async function countMails(sql: Sql): Promise<{
  inbound: InboundByOutcome[];
  pruned: { status: string; count: number }[];
  outbound: { replied: number; sent: number; failed: number };
}> {
  const [inbound, [outbound]] = await Promise.all([
    sql<{ status: string; outcome: string | null; count: number; pruned: boolean }[]>`
      select status, outcome, count(*)::float8 as count, false as pruned
      from app.mail_messages group by status, outcome
      union all
      select status, null, count::float8, true from app.mail_messages_pruned`,
    sql<{ replied: number; sent: number; failed: number }[]>`
      select
        count(*) filter (where status = 'sent' and kind in ('mail_instructions', 'mail_reply'))::int
          as replied,
        count(*) filter (where status = 'sent')::int as sent,
        count(*) filter (where status = 'failed')::int as failed
      from app.outbox`,
  ]);
  return {
    inbound: inbound
      .filter((row) => !row.pruned)
      .map(({ status, outcome, count }) => ({ status, outcome, count })),
    pruned: inbound.filter((row) => row.pruned).map(({ status, count }) => ({ status, count })),
    outbound: outbound ?? { replied: 0, sent: 0, failed: 0 },
  };
}
