import type { Sql } from "../db/connect.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";

/** How far the count of the ledger's figures has gone (app.ledger_backfill). */
export interface LedgerCountState {
  finished: boolean;
  countedTo: string | null;
  batches: number;
}

export interface LedgerCountPace {
  /** Claims with a live payout per batch (one transaction each). */
  batchSize: number;
  /** Batches per tick: a progress line is logged after each tick. */
  batchesPerTick: number;
}

/**
 * 200 claims a batch took 25 ms at most at a year's size (BENCHMARKS.md#a-year-of-traffic): a
 * tick's call, about a second, stays well inside the workers' statement_timeout (15 s).
 */
const PACE: LedgerCountPace = { batchSize: 200, batchesPerTick: 50 };

/** How often a finished count is looked at again: only a recount (docs/operating.md#the-ledgers-count-migration-0027) restarts it. */
const FINISHED_INTERVAL_MS = 600_000;
/**
 * The loop's interval while the count is unfinished: also what a failed tick waits (a call that
 * gave way to writers until its statement_timeout), and how often a standby replica asks for the
 * lock. Ten minutes there would leave the readers counting afresh that long.
 */
const COUNTING_INTERVAL_MS = 5_000;

/**
 * Counts the ledger's figures once (app.count_ledger_figures, migration 0027's tables) after
 * the service has started, instead of during its start: at a year's size the count takes
 * minutes, and the readers count afresh until it has finished
 * (docs/operating.md#the-ledgers-count-migration-0027). One replica counts, under its lock;
 * a count cut short (a stop, a lost connection) goes on from its cursor.
 */
export function createLedgerCountWorker(
  deps: Pick<ServiceDeps, "sql" | "logger">,
  pace: LedgerCountPace = PACE,
): Worker {
  const log = deps.logger.child({ worker: "ledger-count" });
  return {
    name: "ledger-count",
    lockKey: LOCK_KEYS.ledgerCount,
    intervalMs: COUNTING_INTERVAL_MS,
    tick: async () => {
      if ((await readLedgerCountState(deps.sql)).finished) return FINISHED_INTERVAL_MS;
      const state = await countLedgerFigures(deps.sql, pace);
      const fields = { counted_to: state.countedTo, batches: state.batches };
      if (state.finished) log.info(fields, "ledger figures counted: the readers use them now");
      else log.info(fields, "counting the ledger's figures; the readers count afresh meanwhile");
      return state.finished ? FINISHED_INTERVAL_MS : true;
    },
  };
}

/** Runs up to `pace.batchesPerTick` batches of the count; how far it has gone after them. */
export async function countLedgerFigures(
  sql: Sql,
  pace: LedgerCountPace = PACE,
): Promise<LedgerCountState> {
  // Outside a transaction: the procedure commits each batch.
  await sql`call app.count_ledger_figures(${pace.batchSize}, '100ms', ${pace.batchesPerTick})`;
  return readLedgerCountState(sql);
}

export async function readLedgerCountState(sql: Sql): Promise<LedgerCountState> {
  const [row] = await sql<{ finished: boolean; counted_to: string | null; batches: string }[]>`
    select finished_at is not null as finished, counted_to, batches::text
    from app.ledger_backfill`;
  return {
    finished: row?.finished ?? false,
    countedTo: row?.counted_to ?? null,
    batches: Number(row?.batches ?? 0),
  };
}
