import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { checkRowCounts, type DriftedCount } from "../../api/db/rowCounts.ts";
import { hasSqlState, SQL_STATE } from "../../api/db/sqlState.ts";
import { withTimeout } from "../../api/withTimeout.ts";
import { reasonOfError } from "../errors.ts";
import { type Finding, fail, ok, warn } from "./doctorFindings.ts";
import type { OperatorConnections } from "./operatorContext.ts";

/**
 * A count over the tables reads every claim, payout and mail: seconds at a year's size, longer
 * than the command's own statement_timeout of 15 s. Its statement may run this long; the wait
 * for it a little longer.
 */
const COUNT_STATEMENT_TIMEOUT_MS = 120_000;
const COUNT_CHECK_TIMEOUT_MS = COUNT_STATEMENT_TIMEOUT_MS + 10_000;

const describe = (drift: DriftedCount) =>
  `${drift.counted}/${drift.label}${drift.detail ? `/${drift.detail}` : ""}: kept ${drift.kept}, fresh ${drift.fresh}`;

/**
 * The counts /metrics shows, kept by triggers (migration 0032), against a count over the tables
 * in the same snapshot. A drift is wrong figures on every scrape from then on, but no money:
 * it fails here, with the way to count again (docs/operating.md#the-scrapes-counts-migration-0032).
 */
export async function checkScrapeCounts(
  _config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  let drifted: DriftedCount[] | null;
  try {
    drifted = await withTimeout(
      checkRowCounts(sql, { statementTimeoutMs: COUNT_STATEMENT_TIMEOUT_MS }),
      COUNT_CHECK_TIMEOUT_MS,
      "the count of the scrape's rows",
    );
  } catch (error) {
    if (hasSqlState(error, SQL_STATE.undefinedFunction)) {
      return [
        warn(
          "metrics",
          "the scrape's kept counts were not compared: the database's definitions are older than this command",
          "start this version's service once (it applies its definitions), then run doctor again",
        ),
      ];
    }
    return [
      warn(
        "metrics",
        `the scrape's kept counts were not compared with a fresh count: ${reasonOfError(error)}`,
        "run doctor again when the database is less busy",
      ),
    ];
  }
  if (drifted === null) {
    return [
      warn(
        "metrics",
        "the scrape's counts are not kept yet: every scrape counts over the tables",
        "run the service with ROLE worker or all: its row-counts worker counts every row once",
      ),
    ];
  }
  if (drifted.length > 0) {
    return [
      fail(
        "metrics",
        `the scrape's kept counts differ from a fresh count: ${drifted.length} differ (${drifted.slice(0, 3).map(describe).join("; ")})`,
        "count them again as docs/operating.md#the-scrapes-counts-migration-0032 says, and report it: a trigger missed a change",
      ),
    ];
  }
  return [ok("metrics", "the scrape's kept counts equal a fresh count")];
}
