import type { Database, Sql } from "./connect.ts";

/**
 * The counts /metrics shows, kept as rows change instead of counted over whole tables on every
 * scrape (migration 0032, api/db/definitions/row_counts.sql;
 * docs/operating.md#the-scrapes-counts-migration-0032). `counted` names the table counted.
 */
export type CountedTable =
  | "claims"
  | "payouts"
  | "outbox"
  | "mail_messages"
  /** The inbound messages deleted by retention, by status, counted by the deleting statement. */
  | "mail_messages_pruned";

/** One kept count: a claim status, a payout or mail event, an inbound message's status. */
export interface RowCount {
  counted: CountedTable;
  label: string;
  /** The inbound message's outcome; null for none, and for the other tables. */
  detail: string | null;
  count: number;
}

/**
 * The kept counts of `tables`: the folded ones plus the changes not folded yet, read in one
 * statement (one snapshot), so a fold running meanwhile moves nothing twice or not at all, and a
 * retention's deletion is either in the inbound counts or in the pruned ones, never neither. A few
 * rows a label, and the changes of the last second or so, however big the tables. Null until the
 * row-counts worker has counted every row once: the caller then counts afresh.
 */
export async function readRowCounts(sql: Sql, tables: CountedTable[]): Promise<RowCount[] | null> {
  const rows = await sql<
    {
      counted_at: Date | null;
      counted: CountedTable | null;
      label: string;
      detail: string;
      n: number;
    }[]
  >`
    select s.counted_at, k.counted, k.label, k.detail, k.n
    from app.row_count_state s
    left join lateral (
      select a.counted, a.label, a.detail, sum(a.n)::float8 as n
      from (
        select r.counted, r.label, r.detail, r.n from app.row_counts r
        where r.counted = any(${tables}::text[])
        union all
        select c.counted, c.label, c.detail, c.change from app.row_count_changes c
        where c.counted = any(${tables}::text[])
        union all
        select 'mail_messages_pruned', p.status, '', p.count from app.mail_messages_pruned p
        where 'mail_messages_pruned' = any(${tables}::text[])
      ) a
      group by a.counted, a.label, a.detail
    ) k on s.counted_at is not null`;
  if (!rows[0]?.counted_at) return null;
  return rows
    .filter((row) => row.counted !== null)
    .map((row) => ({ ...countKey(row), count: row.n }));
}

/** What a count counts, from its row (the table stores no detail as ''). */
function countKey(row: { counted: CountedTable | null; label: string; detail: string }) {
  return {
    counted: row.counted as CountedTable,
    label: row.label,
    detail: row.detail === "" ? null : row.detail,
  };
}

/** The sum of `counts` of one table and label (every detail). */
export function keptCount(counts: RowCount[], counted: CountedTable, label: string): number {
  return counts
    .filter((row) => row.counted === counted && row.label === label)
    .reduce((sum, row) => sum + row.count, 0);
}

/**
 * Moves the changes committed so far into the folded counts (app.fold_row_count_changes); how
 * many change rows it moved.
 */
export async function foldRowCountChanges(sql: Sql): Promise<number> {
  const [row] = await sql<{ folded: string }[]>`
    select app.fold_row_count_changes()::text as folded`;
  return Number(row?.folded ?? 0);
}

/**
 * How long the count may read: every claim, payout and mail, seconds at a year's size, beyond the
 * workers' 15 s statement_timeout on a slow disk.
 */
const COUNT_TIMEOUT = "10min";

/**
 * Counts every row once, in one repeatable read snapshot (app.count_rows): what the triggers
 * kept before is replaced by it, and the changes committed after the snapshot are folded later.
 * Locks nothing a writer waits for. A count that fails (a fold or a recount in another process
 * at once) changes nothing, and is tried again.
 */
export async function countRows(database: Database): Promise<{ countMs: number }> {
  return database.begin("isolation level repeatable read", async (transaction) => {
    await transaction`select set_config('statement_timeout', ${COUNT_TIMEOUT}, true)`;
    await transaction`select app.count_rows()`;
    const [row] = await transaction<{ count_ms: number }[]>`
      select count_ms from app.row_count_state`;
    return { countMs: row?.count_ms ?? 0 };
  });
}

/** Whether every row has been counted once (app.row_count_state). */
export async function rowsCounted(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ counted: boolean }[]>`
    select counted_at is not null as counted from app.row_count_state`;
  return row?.counted ?? false;
}

/** A kept count that differs from a count over its table. */
export interface DriftedCount {
  counted: CountedTable;
  label: string;
  detail: string | null;
  kept: number;
  fresh: number;
}

/** The tables a fresh count covers (the pruned messages are gone: nothing counts them again). */
const FRESHLY_COUNTED: CountedTable[] = ["claims", "payouts", "outbox", "mail_messages"];

/**
 * The kept counts, as the scrape reads them (`readRowCounts`), against a count over the tables
 * (app.fresh_row_counts, the count's own query), in one repeatable read snapshot: any difference
 * is a change the triggers missed (a hand edit with them off, say), not one in flight. Null while
 * the row-counts worker has not counted every row once (the scrape counts afresh then). Reads
 * every claim, payout and mail: seconds at a year, for `pay-and-earn doctor`, never for a scrape.
 */
export async function checkRowCounts(
  database: Database,
  options: { statementTimeoutMs: number },
): Promise<DriftedCount[] | null> {
  return database.begin("isolation level repeatable read read only", async (transaction) => {
    await transaction`select set_config('statement_timeout', ${String(options.statementTimeoutMs)}, true)`;
    const kept = await readRowCounts(transaction, FRESHLY_COUNTED);
    if (!kept) return null;
    const fresh = await transaction<
      { counted: CountedTable; label: string; detail: string; n: number }[]
    >`select counted, label, detail, n::float8 as n from app.fresh_row_counts()`;
    const keyOf = (count: { counted: string; label: string; detail: string | null }) =>
      `${count.counted}\u0000${count.label}\u0000${count.detail ?? ""}`;
    const compared = new Map<string, DriftedCount>();
    const entry = (count: Omit<RowCount, "count">) => {
      const key = keyOf(count);
      const { counted, label, detail } = count;
      const found = compared.get(key) ?? { counted, label, detail, kept: 0, fresh: 0 };
      compared.set(key, found);
      return found;
    };
    for (const count of kept) entry(count).kept += count.count;
    for (const row of fresh) entry(countKey(row)).fresh += row.n;
    return [...compared.entries()]
      .filter(([, count]) => count.kept !== count.fresh)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, count]) => count);
  });
}
