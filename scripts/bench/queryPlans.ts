import postgres from "postgres";
import type { Database } from "../../api/db/connect.ts";

/**
 * Whether a statement reads a table that grows with traffic from end to end: what a hot query
 * must never do on a year's database (BENCHMARKS.md#a-year-of-traffic). Used by bench:scale on
 * the year, and by test/integration/hotQueryPlans.test.ts on a test database with sequential
 * scans off, where the plan shows what the indexes allow.
 */

/**
 * Growing tables whose size has a bound that traffic does not move: a row per amount of the
 * amount space (999,999 at most), so reading them whole costs at most a fixed time (54 ms at a
 * full space, BENCHMARKS.md#a-year-of-traffic). Health's amount space fill counts every held
 * amount on purpose, once a health computation, not per request. bench:scale reports such a
 * scan on the year without failing the run; the tests still plan them against their index.
 */
export const BOUNDED_BY_AMOUNT_SPACE = ["amount_reservations"];

/** Tables that grow with traffic: reading one of these whole is flagged. */
export const GROWING = [
  "claims",
  "payments",
  "payouts",
  "payout_attempts",
  "receipts",
  "x402_payments",
  "unmatched_transfers",
  "outbox",
  // inbound mail, kept MAIL_RETENTION_DAYS (30) after it was acted on: a month of it
  "mail_messages",
  "amount_reservations",
  "events",
  "webhook_deliveries",
  "incoming_transfer",
  "outgoing_transfer",
  // the ledger's figures by address (a row per address, and per address and day); not
  // app.ledger_days, a row a day, which the totals read whole on purpose
  "ledger_payees",
  "ledger_day_payees",
];

/** A statement as postgres.js sent it (its `debug` option), to be EXPLAINed as sent. */
export interface CapturedStatement {
  query: string;
  parameters: unknown[];
  types: number[];
}

type PlanNode = Record<string, unknown>;

/**
 * The growing tables a statement's plan reads whole: by a sequential scan, or by an index scan
 * with no condition on an index that holds every row. A partial index is taken to hold only its
 * rows, which misses one whose predicate itself grows with traffic (every x402 payment, say):
 * bench:scale's timings on the year are the check for those.
 * Its parameters are bound as sent; an UPDATE or DELETE is planned, not run (no ANALYZE).
 */
export async function wholeTableReads(
  sql: Database | postgres.TransactionSql,
  statement: CapturedStatement,
): Promise<string[]> {
  if (!/^\s*(select|with|update|delete)\b/i.test(statement.query)) return [];
  const [row] = await sql.unsafe<{ "QUERY PLAN": unknown }[]>(
    `explain (format json) ${statement.query}`,
    statement.parameters as postgres.ParameterOrJSON<never>[],
    { prepare: false },
  );
  const scans: { relation: string; index?: string }[] = [];
  const walk = (node: PlanNode) => {
    const relation = node["Relation Name"];
    const type = node["Node Type"];
    if (typeof relation === "string" && GROWING.includes(relation)) {
      if (type === "Seq Scan") scans.push({ relation });
      const index = node["Index Name"];
      if (
        (type === "Index Scan" || type === "Index Only Scan") &&
        typeof index === "string" &&
        node["Index Cond"] === undefined
      ) {
        scans.push({ relation, index });
      }
    }
    for (const child of (node.Plans as PlanNode[] | undefined) ?? []) walk(child);
  };
  const plans = row?.["QUERY PLAN"] as { Plan: PlanNode }[] | undefined;
  for (const plan of plans ?? []) walk(plan.Plan);

  const found: string[] = [];
  for (const scan of scans) {
    if (scan.index && (await isPartialIndex(sql, scan.index))) continue;
    found.push(scan.relation);
  }
  return found;
}

async function isPartialIndex(
  sql: Database | postgres.TransactionSql,
  index: string,
): Promise<boolean> {
  const [row] = await sql.unsafe<{ partial: boolean }[]>(
    `select i.indpred is not null as partial
     from pg_index i join pg_class c on c.oid = i.indexrelid
     where c.relname = $1`,
    [index],
    { prepare: false },
  );
  return row?.partial ?? false;
}

/**
 * A one-connection pool on `databaseUrl` that keeps what it sends while `capture` runs: the
 * statements a function of the service sends, as it sends them, to be planned here.
 */
export function capturingConnection(databaseUrl: string) {
  let capturing: CapturedStatement[] | null = null;
  const sql = postgres(databaseUrl, {
    max: 1,
    onnotice: () => {},
    types: { bigint: postgres.BigInt },
    debug: (_connection, query, parameters, types) => {
      capturing?.push({ query, parameters: parameters as unknown[], types: types as number[] });
    },
  }) as unknown as Database;
  return {
    sql,
    /** Runs `run` on the pool; returns the statements it sent. */
    async capture(run: (sql: Database) => Promise<unknown>): Promise<CapturedStatement[]> {
      const statements: CapturedStatement[] = [];
      capturing = statements;
      try {
        await run(sql);
      } finally {
        capturing = null;
      }
      return statements;
    },
  };
}
