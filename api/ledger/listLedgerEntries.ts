import type { Sql } from "../db/connect.ts";
import { limitLiteral } from "../db/limitLiteral.ts";
import type { LedgerCursor } from "../schemas/ledgerCursor.ts";

/** One completed payout, as stored (addresses lowercase, amounts atomic). Never an email. */
export interface LedgerEntry {
  claimId: string;
  flow: "claim" | "x402" | "mail";
  agentName: string | null;
  payoutAddress: string;
  amount: bigint;
  /** The payment's transaction; null only if the payment is not on record (not expected). */
  paymentTx: string | null;
  payoutTx: string;
  completedAt: Date;
  /** Where the next page starts when this entry is the last of a page. */
  cursor: LedgerCursor;
}

export interface LedgerFilter {
  /** Exact agent name. */
  agentName?: string | undefined;
  /** Completed at or after. */
  since?: Date | undefined;
  /** Completed strictly before. */
  until?: Date | undefined;
}

export interface LedgerPageRequest extends LedgerFilter {
  limit: number;
  after?: LedgerCursor | null | undefined;
}

export interface LedgerPage {
  entries: LedgerEntry[];
  /** Set when more entries follow the last one of this page. */
  nextCursor: LedgerCursor | null;
}

interface Row {
  id: string;
  flow: LedgerEntry["flow"];
  agent_name: string | null;
  payout_address: string;
  amount: string;
  payment_tx: string | null;
  payout_tx: string;
  completed_at: Date;
  completed_at_exact: string;
}

/**
 * Completed payouts, newest first, one keyset page after `after` (a claim without a completed_at
 * is no entry: api/db/definitions/ledger_stats.sql). Ties in completed_at (one
 * transaction completes many claims) are broken by the claim id in byte order (`collate "C"`),
 * the same on every server whatever its locale.
 */
export async function listLedgerEntries(sql: Sql, request: LedgerPageRequest): Promise<LedgerPage> {
  const { after, agentName, since, until } = request;
  // One extra row says whether another page follows, without a count; the limit is written in
  // the text, rounded up, so the statement keeps one plan (limitLiteral): the rows past the
  // extra one are dropped. The cursor's time goes
  // in as text: a parameter Postgres infers as timestamptz is serialized by postgres.js through
  // a JS Date, which drops the microseconds and skips claims completed in the same millisecond.
  const rows = await sql<Row[]>`
    ${entryColumns(sql)}
    where c.status = 'completed' and c.completed_at is not null
      ${after ? sql`and (c.completed_at, c.id collate "C") < (${after.completedAt}::text::timestamptz, ${after.claimId})` : sql``}
      ${agentName !== undefined ? sql`and c.agent_name = ${agentName}` : sql``}
      ${since ? sql`and c.completed_at >= ${since}` : sql``}
      ${until ? sql`and c.completed_at < ${until}` : sql``}
    order by c.completed_at desc, c.id collate "C" desc
    limit ${limitLiteral(sql, request.limit + 1)}`;
  const entries = rows.slice(0, request.limit).map(entryOf);
  const last = entries.at(-1);
  return { entries, nextCursor: rows.length > request.limit && last ? last.cursor : null };
}

/** The select and joins of a ledger entry, up to its where clause. */
function entryColumns(sql: Sql) {
  return sql`
    select c.id, c.flow, c.agent_name, c.payout_address, po.amount, p.tx_hash as payment_tx,
      po.tx_hash as payout_tx, c.completed_at,
      to_char(c.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        as completed_at_exact
    from app.claims c
    join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    left join app.payments p on p.claim_id = c.id`;
}

function entryOf(row: Row): LedgerEntry {
  return {
    claimId: row.id,
    flow: row.flow,
    agentName: row.agent_name,
    payoutAddress: row.payout_address,
    amount: BigInt(row.amount),
    paymentTx: row.payment_tx,
    payoutTx: row.payout_tx,
    completedAt: row.completed_at,
    cursor: { completedAt: row.completed_at_exact, claimId: row.id },
  };
}

/**
 * The ledger entries of these claims, those that are in the ledger now (completed, payout
 * confirmed), in no order: what the live ledger stream sends when claims complete.
 */
export async function readLedgerEntries(sql: Sql, claimIds: string[]): Promise<LedgerEntry[]> {
  if (claimIds.length === 0) return [];
  const rows = await sql<Row[]>`
    ${entryColumns(sql)}
    where c.id = any(${claimIds}::text[]) and c.status = 'completed'
      and c.completed_at is not null`;
  return rows.map(entryOf);
}
