import type { IncomingTransfer } from "../../api/chain/incomingTransfers.ts";
import { readAmountSpaceFill } from "../../api/claims/reserveAmount.ts";
import type { Database } from "../../api/db/connect.ts";
import { countRows } from "../../api/db/rowCounts.ts";
import { readClaimsByStatus, readStuckPayouts } from "../../api/health/attentionLists.ts";
import { readAttention } from "../../api/health/readAttention.ts";
import { readMatcherBacklog, readPayoutBacklog } from "../../api/health/readBacklog.ts";
import { listLedgerEntries } from "../../api/ledger/listLedgerEntries.ts";
import { readLedgerDaily, readLedgerTotals } from "../../api/ledger/readLedgerStats.ts";
import { releaseExpiredReservations } from "../../api/lifecycle/releaseReservations.ts";
import { recordStaleSettlingsUnknown } from "../../api/lifecycle/x402Records.ts";
import { readMailCounts } from "../../api/mailbox/mailStatus.ts";
import { alreadyRecorded, loadMatchingContext } from "../../api/matcher/loadMatchingContext.ts";
import { readStatusCounts } from "../../api/metrics/readStatusCounts.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { readPayoutCounts } from "../../api/payouts/payoutFunding.ts";
import type { LedgerCursor } from "../../api/schemas/ledgerCursor.ts";
import { type CapturedStatement, capturingConnection, wholeTableReads } from "./queryPlans.ts";

/**
 * The service's hot reads, called as the service calls them (the functions themselves, not
 * copies of their SQL), timed, and each statement they send EXPLAINed with its parameters: on the
 * year's database a plan that reads a big table from end to end is a finding (BENCHMARKS.md#a-year-of-traffic).
 */

export interface ProbeResult {
  name: string;
  medianMs: number;
  /** Growing tables some statement of the probe reads whole (scripts/bench/queryPlans.ts). */
  scans: string[];
  statements: number;
  /**
   * Statements of the probe that PostgreSQL still planned afresh on every call after `times`
   * calls (no generic plan in pg_prepared_statements): each call pays for its planning
   * (docs/traps.md#postgresql, a limit sent as a parameter).
   */
  plannedEachCall: number;
}

export interface ProbeInputs {
  chainId: number;
  /** A claim 100,000 entries deep in the ledger (or as deep as it goes). */
  deepCursor: LedgerCursor;
  /** 1,000 transfers as the matcher would read a busy block: new senders, amounts, hashes. */
  blockOfTransfers: IncomingTransfer[];
  confirmedThrough: bigint;
}

/** The probes: each a function of the service or the CLI over one connection. */
function probes(inputs: ProbeInputs): { name: string; run: (sql: Database) => Promise<unknown> }[] {
  const monthAgo = new Date(Date.now() - 30 * 86_400_000);
  return [
    {
      name: "health: attention counts",
      run: (sql) => readAttention(sql, { chainId: inputs.chainId, confirmations: 3 }),
    },
    {
      name: "health: matcher backlog",
      run: (sql) => readMatcherBacklog(sql, inputs.confirmedThrough),
    },
    { name: "health: payout backlog", run: (sql) => readPayoutBacklog(sql) },
    { name: "health: amount space fill", run: (sql) => readAmountSpaceFill(sql, 999_999) },
    {
      name: "payouts: funding counts (each signing round)",
      run: (sql) => readPayoutCounts(sql, 0n),
    },
    {
      name: "x402: stale settlings (every second)",
      run: (sql) => recordStaleSettlingsUnknown(sql, 30_000),
    },
    {
      name: "expiry: released reservations",
      run: (sql) => releaseExpiredReservations(sql),
    },
    { name: "ledger stats: totals (uncached)", run: (sql) => readLedgerTotals(sql) },
    { name: "ledger stats: 30 days (uncached)", run: (sql) => readLedgerDaily(sql, 30) },
    { name: "ledger: first page (uncached)", run: (sql) => listLedgerEntries(sql, { limit: 20 }) },
    {
      name: "ledger: page 100,000 deep",
      run: (sql) => listLedgerEntries(sql, { limit: 20, after: inputs.deepCursor }),
    },
    {
      name: "ledger: one agent's first page",
      run: (sql) => listLedgerEntries(sql, { limit: 20, agentName: "agent-17" }),
    },
    {
      name: "matcher: context of 1,000 transfers",
      run: async (sql) => {
        await alreadyRecorded(sql, inputs.blockOfTransfers);
        await loadMatchingContext(sql, inputs.blockOfTransfers, {
          variant: "A",
          price: PRICE_ATOMIC,
        });
      },
    },
    { name: "cli: payouts --stuck", run: (sql) => readStuckPayouts(sql, 600) },
    {
      name: "cli: claims --status failed",
      run: (sql) => readClaimsByStatus(sql, "failed", monthAgo, 50),
    },
    {
      name: "cli: claims --status paid",
      run: (sql) => readClaimsByStatus(sql, "paid", monthAgo, 50),
    },
    // Once after migration 0032 (the row-counts worker's first tick), reading every row on
    // purpose, in one snapshot: its time on the year is the migration's cost
    // (docs/operating.md#the-scrapes-counts-migration-0032). The year is written with triggers
    // off, so the scrapes below read what this counted.
    {
      name: "metrics: every row counted once (after migration 0032)",
      run: (sql) => countRows(sql),
    },
    { name: "metrics scrape: claims and payouts", run: (sql) => readStatusCounts(sql) },
    { name: "metrics scrape: mails", run: (sql) => readMailCounts(sql) },
  ];
}

/**
 * Runs every probe `times` times (median wall time), then EXPLAINs what each one sent and asks
 * which of its statements never got a generic plan. PostgreSQL tries a generic plan from a
 * prepared statement's sixth call: `times` is more than that.
 */
export async function runProbes(
  databaseUrl: string,
  inputs: ProbeInputs,
  times = 7,
): Promise<ProbeResult[]> {
  const { sql, capture } = capturingConnection(databaseUrl);
  const results: ProbeResult[] = [];
  try {
    for (const probe of probes(inputs)) {
      const statements = await capture(probe.run);
      const durations: number[] = [];
      for (let round = 0; round < times; round++) {
        const started = performance.now();
        await probe.run(sql);
        durations.push(performance.now() - started);
      }
      durations.sort((a, b) => a - b);
      const scans = new Set<string>();
      for (const statement of statements) {
        for (const table of await wholeTableReads(sql, statement)) scans.add(table);
      }
      results.push({
        name: probe.name,
        medianMs: durations[Math.floor(durations.length / 2)] ?? Number.NaN,
        scans: [...scans],
        statements: statements.length,
        plannedEachCall: await plannedEachCall(sql, statements),
      });
    }
  } finally {
    await sql.end();
  }
  return results;
}

/**
 * How many of `statements` this connection prepared and has planned only with custom plans: a
 * statement run once (a write that found nothing to do, say) or never prepared is not counted.
 */
async function plannedEachCall(sql: Database, statements: CapturedStatement[]): Promise<number> {
  const texts = [...new Set(statements.map((statement) => statement.query))];
  const [row] = await sql<{ planned: number }[]>`
    select count(*)::int as planned from pg_prepared_statements
    where statement = any(${texts}::text[]) and generic_plans = 0 and custom_plans > 5`;
  return row?.planned ?? 0;
}
