import { countRows, foldRowCountChanges, rowsCounted } from "../db/rowCounts.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";

/**
 * How often the changes are folded: the scrape reads the changes of about this long (a few
 * thousand rows at 4,700 claim creations a second), and the folded counts whatever the tables'
 * size. Also how often a standby replica asks for the lock.
 */
const FOLD_INTERVAL_MS = 1_000;

/** The most changes one fold moves (app.fold_row_count_changes). */
const FOLD_BATCH = 10_000;

/**
 * Keeps the scrape's counts (migration 0032): counts every row once after the start that applied
 * the migration, in one snapshot (seconds at a year, nothing locked), then folds the triggers'
 * changes every second (docs/operating.md#the-scrapes-counts-migration-0032). One replica at a
 * time, under its lock; a count cut short is made again whole at the next tick.
 */
export function createRowCountWorker(deps: Pick<ServiceDeps, "sql" | "logger">): Worker {
  const log = deps.logger.child({ worker: "row-counts" });
  return {
    name: "row-counts",
    lockKey: LOCK_KEYS.rowCounts,
    intervalMs: FOLD_INTERVAL_MS,
    tick: async () => {
      if (!(await rowsCounted(deps.sql))) {
        log.info(
          "counting every claim, payout and mail once for /metrics; it counts afresh meanwhile",
        );
        const { countMs } = await countRows(deps.sql);
        log.info(
          { count_ms: Math.round(countMs) },
          "rows counted: /metrics reads the kept counts now",
        );
      }
      // A full batch: a backlog may wait (the worker was stopped), folded at once batch by batch.
      return (await foldRowCountChanges(deps.sql)) >= FOLD_BATCH;
    },
  };
}
