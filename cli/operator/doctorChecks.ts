import { formatEther } from "viem";
import { readIndexedBlock } from "../../api/chain/indexedBlock.ts";
import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { pingDatabase } from "../../api/db/connect.ts";
import {
  type AppliedMigration,
  describeMigrations,
  driftedMigrations,
  type Migration,
  readAppliedMigrations,
  readMigrations,
  unknownMigrations,
} from "../../api/db/migrate.ts";
import { formatUsdc } from "../../api/money.ts";
import { readPayoutFunding, readPayoutsPerDay } from "../../api/payouts/payoutFunding.ts";
import { HEALTH_REASONS } from "../../api/reasons/reasonCatalog.ts";
import { withTimeout } from "../../api/withTimeout.ts";
import { reasonOfError } from "../errors.ts";
import { CHECK_TIMEOUT_MS, type Finding, fail, ok, warn } from "./doctorFindings.ts";
import { checkLedger } from "./doctorLedgerCheck.ts";
import { checkScrapeCounts } from "./doctorRowCountsCheck.ts";
import {
  checkAttention,
  checkMail,
  checkReceiptKey,
  checkRunningService,
} from "./doctorServiceChecks.ts";
import type { OperatorConnections } from "./operatorContext.ts";

export type { Finding };

/** Days of payouts below which the payout wallet's runway is a warning. */
const RUNWAY_WARN_DAYS = 7;
/** The days whose payouts make the rate the runway is counted at. */
const RATE_DAYS = 7;

type Check = (config: ServiceConfig, connections: OperatorConnections) => Promise<Finding[]>;

/**
 * What `doctor` looks at, in order, each one on its own: a failing check never hides the
 * others. The configuration check runs first and on its own (cli/operator/doctorCommand.ts).
 */
export const DOCTOR_CHECKS: Check[] = [
  checkRpc,
  checkDatabase,
  checkIndexer,
  checkPayoutWallet,
  checkReceiptKey,
  checkMail,
  checkAttention,
  checkLedger,
  checkScrapeCounts,
  checkRunningService,
];

async function checkRpc(config: ServiceConfig, { chain }: OperatorConnections): Promise<Finding[]> {
  try {
    const [chainId, head] = await withTimeout(
      Promise.all([chain.getChainId(), chain.getBlockNumber()]),
      CHECK_TIMEOUT_MS,
      "the RPC",
    );
    if (chainId !== config.chain.chainId) {
      return [
        fail(
          "rpc",
          `RPC_URL serves chain ${chainId}, CHAIN_ID is ${config.chain.chainId}`,
          `point RPC_URL at a node of chain ${config.chain.chainId}`,
        ),
      ];
    }
    return [ok("rpc", `chain ${chainId}, head block ${head}`)];
  } catch (error) {
    return [
      fail(
        "rpc",
        `RPC_URL does not answer: ${reasonOfError(error)}`,
        "check RPC_URL and the node behind it",
      ),
    ];
  }
}

async function checkDatabase(
  _config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  try {
    await withTimeout(pingDatabase(sql), CHECK_TIMEOUT_MS, "the database");
  } catch (error) {
    return [
      fail(
        "database",
        `DATABASE_URL does not answer: ${reasonOfError(error)}`,
        "check DATABASE_URL and that PostgreSQL runs",
      ),
    ];
  }
  const applied = await readAppliedMigrations(sql).catch(() => []);
  return [ok("database", "answers"), migrationsFinding(await readMigrations(), applied)];
}

/** The applied migrations against this code's: pending, unknown, or changed since applied. */
function migrationsFinding(known: Migration[], applied: AppliedMigration[]): Finding {
  const appliedIds = new Set(applied.map((row) => row.id));
  const pending = known.filter((migration) => !appliedIds.has(migration.id));
  const unknown = unknownMigrations(applied, known);
  if (pending.length > 0) {
    return warn(
      "migrations",
      `${pending.length} of ${known.length} not applied (${pending.map((m) => m.id).join(", ")})`,
      "start the service: it applies them at start",
    );
  }
  if (unknown.length > 0) {
    return warn(
      "migrations",
      `the database has migrations this code does not know (${unknown.join(", ")})`,
      "run the doctor of the version that is deployed",
    );
  }
  const drifted = driftedMigrations(applied, known);
  if (drifted.length > 0) {
    return warn(
      "migrations",
      `changed after this database applied them: ${describeMigrations(drifted)}`,
      "the database keeps what it applied: put the change in a new migration",
    );
  }
  return ok("migrations", `all ${known.length} applied`);
}

async function checkIndexer(
  config: ServiceConfig,
  { sql, chain }: OperatorConnections,
): Promise<Finding[]> {
  try {
    const [indexed, head] = await withTimeout(
      Promise.all([readIndexedBlock(sql, config.chain.chainId), chain.getBlockNumber()]),
      CHECK_TIMEOUT_MS,
      "the indexer",
    );
    if (indexed === null) {
      return [
        fail(
          "indexer",
          HEALTH_REASONS.indexer_not_ready,
          "start Ponder (npm start starts it) and let it finish its backfill",
        ),
      ];
    }
    const lag = Number(head - indexed);
    const detail = `Ponder has indexed block ${indexed}, ${Math.max(0, lag)} behind the head`;
    if (lag > config.indexer.maxLagBlocks) {
      return [
        warn(
          "indexer",
          `${detail} (more than INDEXER_MAX_LAG_BLOCKS=${config.indexer.maxLagBlocks})`,
          "look at Ponder's log and its RPC: payments wait until it catches up",
        ),
      ];
    }
    return [ok("indexer", detail)];
  } catch (error) {
    return [
      fail(
        "indexer",
        `cannot read Ponder's progress: ${reasonOfError(error)}`,
        "fix the database and RPC checks above first",
      ),
    ];
  }
}

async function checkPayoutWallet(
  config: ServiceConfig,
  { sql, chain }: OperatorConnections,
): Promise<Finding[]> {
  try {
    const funding = await withTimeout(
      readPayoutFunding({ sql, chain, config }),
      CHECK_TIMEOUT_MS,
      "the payout wallet",
    );
    const perDay = await readPayoutsPerDay(sql, RATE_DAYS);
    const covered = Math.min(funding.coveredByUsdc, funding.coveredByEth);
    const balances = `${funding.wallet} holds ${formatUsdc(funding.usdcBalance)} USDC and ${formatEther(funding.ethBalance)} ETH: ${Math.max(0, covered)} more payouts`;
    if (covered < 1) {
      const short = funding.coveredByUsdc < 1 ? "USDC" : "ETH (gas)";
      return [
        fail(
          "payout wallet",
          `${balances}; it cannot pay the next payout`,
          `send ${short} to ${funding.wallet}: claims wait in paid until then`,
        ),
      ];
    }
    if (perDay === 0)
      return [ok("payout wallet", `${balances}; no payouts in the last ${RATE_DAYS} days`)];
    const days = covered / perDay;
    const runway = `${balances}, ${days.toFixed(1)} days at ${perDay.toFixed(1)} payouts a day (last ${RATE_DAYS} days)`;
    if (days < RUNWAY_WARN_DAYS) {
      return [
        warn(
          "payout wallet",
          runway,
          `top up ${funding.wallet} with USDC and ETH for the weeks ahead`,
        ),
      ];
    }
    return [ok("payout wallet", runway)];
  } catch (error) {
    return [
      fail(
        "payout wallet",
        `cannot read its balances: ${reasonOfError(error)}`,
        "fix the database and RPC checks above first",
      ),
    ];
  }
}
