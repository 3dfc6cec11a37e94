import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { checkLedgerFigures } from "../../api/ledger/checkLedgerFigures.ts";
import { withTimeout } from "../../api/withTimeout.ts";
import { reasonOfError } from "../errors.ts";
import { type Finding, fail, ok, warn } from "./doctorFindings.ts";
import type { OperatorConnections } from "./operatorContext.ts";

/**
 * A fresh count reads every completed payout: a minute or more at a year's size, so longer than
 * the other checks may take. Its statements may run this long (the command's own
 * statement_timeout is 15 s); the wait for them a little longer.
 */
const LEDGER_STATEMENT_TIMEOUT_MS = 120_000;
const LEDGER_CHECK_TIMEOUT_MS = 2 * LEDGER_STATEMENT_TIMEOUT_MS + 10_000;

/**
 * The ledger's figures the database keeps (GET /ledger, GraphQL stats) against a fresh count of
 * its entries: a figure that drifted is worse than a slow one, so it fails here
 * (docs/operating.md#the-ledgers-count-migration-0027 says how to count them again).
 */
export async function checkLedger(
  _config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  let check: Awaited<ReturnType<typeof checkLedgerFigures>>;
  try {
    check = await withTimeout(
      checkLedgerFigures(sql, { statementTimeoutMs: LEDGER_STATEMENT_TIMEOUT_MS }),
      LEDGER_CHECK_TIMEOUT_MS,
      "the ledger count",
    );
  } catch (error) {
    return [
      warn(
        "ledger",
        `its figures were not compared with a fresh count: ${reasonOfError(error)}`,
        "run doctor again when the database is less busy",
      ),
    ];
  }
  if (!check.kept) {
    return [
      warn(
        "ledger",
        `its figures are still being counted (up to claim ${check.countedTo ?? "none yet"}); reads count afresh until the count has finished`,
        "run the service with ROLE worker or all: its ledger-count worker counts them",
      ),
    ];
  }
  // No day to count them on, so in no figure (api/db/definitions/ledger_stats.sql).
  const undated =
    check.undated > 0
      ? [
          warn(
            "ledger",
            `${check.undated} completed claims with a confirmed payout have no completed_at: no figure counts them`,
            "set each one's completed_at to its payout's confirmed_at; the figures count it from then",
          ),
        ]
      : [];
  if (check.drifted.length > 0 || check.driftedPayees > 0) {
    const first = check.drifted[0];
    const days = first
      ? `${check.drifted.length} days differ (${first.day}: kept ${first.kept}, fresh ${first.fresh})`
      : "every day agrees";
    return [
      fail(
        "ledger",
        `its kept figures differ from a fresh count: ${days}; ${check.driftedPayees} payout address counts differ`,
        "count them again (docs/operating.md#the-ledgers-count-migration-0027) and report it: a trigger missed a change",
      ),
      ...undated,
    ];
  }
  return [ok("ledger", "its kept figures equal a fresh count"), ...undated];
}
