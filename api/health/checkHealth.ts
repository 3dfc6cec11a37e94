import { formatEther, type PublicClient } from "viem";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import type { Sql } from "../db/connect.ts";
import { formatUsdcFixed } from "../money.ts";
import { type PayoutFunding, readPayoutFunding } from "../payouts/payoutFunding.ts";
import { withTimeout } from "../withTimeout.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { readMatcherBacklog, readPayoutBacklog } from "./readBacklog.ts";

export type HealthStatus = "ok" | "degraded" | "down";

/** Stable snake_case codes; `down` reasons make the report `down`, the rest `degraded`. */
export type HealthReason =
  | "database_unreachable"
  | "rpc_unreachable"
  | "rpc_wrong_chain"
  | "indexer_not_ready"
  | "indexer_behind"
  | "payout_wallet_low_usdc"
  | "payout_wallet_low_eth"
  /** A confirmed payment has waited for the matcher longer than HEALTH_MATCHER_BACKLOG_SECONDS. */
  | "matcher_behind"
  /** A paid claim has waited for its payout to be signed longer than HEALTH_PAYOUT_BACKLOG_SECONDS. */
  | "payouts_waiting"
  /** A signed payout has not been mined for longer than HEALTH_PAYOUT_BACKLOG_SECONDS. */
  | "payouts_unconfirmed";

const DOWN_REASONS = new Set<HealthReason>([
  "database_unreachable",
  "rpc_unreachable",
  "rpc_wrong_chain",
]);

export interface HealthReport {
  status: HealthStatus;
  reasons: HealthReason[];
  database: { ok: boolean };
  chain: { ok: boolean; chain_id: number; head_block: number | null };
  indexer: { ok: boolean; indexed_block: number | null; lag_blocks: number | null };
  /** The payout wallet and the backlog; null where the service does not check it. */
  payouts: PayoutsHealth | null;
  /** Work waiting for the matcher and the payout loops; null where unchecked or unreadable. */
  backlog: BacklogHealth | null;
  checked_at: string;
}

export interface PayoutsHealth {
  /** The wallet can pay the next payout (USDC and gas, beyond what it already owes). */
  ok: boolean;
  wallet: string | null;
  /** Decimal strings: USDC with six places, ETH in ether. */
  usdc_balance: string | null;
  eth_balance: string | null;
  /** Claims waiting for their payout to be signed. */
  claims_paid: number | null;
  /** Payouts signed or broadcast whose outcome is not stored yet. */
  payouts_unfinished: number | null;
}

/** Counts and ages (whole seconds; null when nothing waits). */
export interface BacklogHealth {
  ok: boolean;
  /** Null until the indexer is ready. */
  matcher: {
    cursor_block: number | null;
    waiting_transfers: number;
    lag_blocks: number;
    oldest_waiting_seconds: number | null;
  } | null;
  payouts: {
    claims_paid: number;
    oldest_paid_seconds: number | null;
    payouts_unfinished: number;
    oldest_unfinished_seconds: number | null;
  };
  /** The ages beyond which the report is degraded. */
  max_age_seconds: { matcher: number; payouts: number };
}

export interface BacklogThresholds {
  /** Blocks on top of a transfer before the matcher takes it. */
  confirmations: number;
  matcherMaxAgeSeconds: number;
  payoutMaxAgeSeconds: number;
}

export interface HealthDependencies {
  sql: Sql;
  chain: PublicClient;
  chainId: number;
  maxIndexerLagBlocks: number;
  /** The payout wallet's funding (payouts/payoutFunding.ts); without it, `payouts` is null. */
  payoutFunding?: () => Promise<PayoutFunding>;
  /** Without it, `backlog` is null. */
  backlog?: BacklogThresholds;
  timeoutMs?: number;
}

/** Everything the service checks, from its configuration. */
export function serviceHealthDependencies(deps: ServiceDeps): HealthDependencies {
  const { config } = deps;
  return {
    sql: deps.sql,
    chain: deps.chain,
    chainId: config.chain.chainId,
    maxIndexerLagBlocks: config.indexer.maxLagBlocks,
    payoutFunding: () => readPayoutFunding(deps),
    backlog: {
      confirmations: config.chain.confirmations,
      matcherMaxAgeSeconds: config.health.matcherBacklogSeconds,
      payoutMaxAgeSeconds: config.health.payoutBacklogSeconds,
    },
  };
}

/** Never throws: every failed check becomes a reason in the report. */
export async function checkHealth(deps: HealthDependencies): Promise<HealthReport> {
  const timeoutMs = deps.timeoutMs ?? 2_000;
  const [database, rpc, indexed, funding] = await Promise.allSettled([
    withTimeout(deps.sql`select 1`, timeoutMs, "the database check"),
    withTimeout(
      Promise.all([deps.chain.getChainId(), deps.chain.getBlockNumber()]),
      timeoutMs,
      "the RPC check",
    ),
    withTimeout(readIndexedBlock(deps.sql, deps.chainId), timeoutMs, "the indexer check"),
    deps.payoutFunding
      ? withTimeout(deps.payoutFunding(), timeoutMs, "the payout wallet check")
      : Promise.resolve(null),
  ]);

  const reasons: HealthReason[] = [];
  if (database.status === "rejected") reasons.push("database_unreachable");

  let headBlock: number | null = null;
  if (rpc.status === "rejected") {
    reasons.push("rpc_unreachable");
  } else if (rpc.value[0] !== deps.chainId) {
    reasons.push("rpc_wrong_chain");
  } else {
    headBlock = Number(rpc.value[1]);
  }

  const indexedBlock =
    indexed.status === "fulfilled" && indexed.value !== null ? Number(indexed.value) : null;
  const lagBlocks =
    indexedBlock !== null && headBlock !== null ? Math.max(0, headBlock - indexedBlock) : null;
  if (database.status === "fulfilled" && indexedBlock === null) reasons.push("indexer_not_ready");
  if (lagBlocks !== null && lagBlocks > deps.maxIndexerLagBlocks) reasons.push("indexer_behind");

  let payouts: PayoutsHealth | null = null;
  if (funding.status === "fulfilled" && funding.value) {
    const wallet = funding.value;
    if (wallet.coveredByUsdc < 1) reasons.push("payout_wallet_low_usdc");
    if (wallet.coveredByEth < 1) reasons.push("payout_wallet_low_eth");
    payouts = {
      ok: wallet.coveredByUsdc >= 1 && wallet.coveredByEth >= 1,
      wallet: wallet.wallet,
      usdc_balance: formatUsdcFixed(wallet.usdcBalance),
      eth_balance: formatEther(wallet.ethBalance),
      claims_paid: wallet.paidClaims,
      payouts_unfinished: wallet.unfinishedPayouts,
    };
  } else if (funding.status === "rejected") {
    // Unreadable: the database or RPC reasons above already say why.
    payouts = {
      ok: false,
      wallet: null,
      usdc_balance: null,
      eth_balance: null,
      claims_paid: null,
      payouts_unfinished: null,
    };
  }

  let backlog: BacklogHealth | null = null;
  if (deps.backlog && database.status === "fulfilled") {
    // Transfers count for the matcher once indexed and confirmed; without the RPC's head the
    // indexed block stands in for it.
    const confirmedThrough =
      indexedBlock === null
        ? null
        : BigInt(Math.min(indexedBlock, headBlock ?? indexedBlock) - deps.backlog.confirmations);
    backlog = await readBacklog(deps.sql, confirmedThrough, deps.backlog, timeoutMs);
    if (backlog) reasons.push(...backlogReasons(backlog, deps.backlog));
  }

  const status: HealthStatus = reasons.some((reason) => DOWN_REASONS.has(reason))
    ? "down"
    : reasons.length > 0
      ? "degraded"
      : "ok";
  return {
    status,
    reasons,
    database: { ok: database.status === "fulfilled" },
    chain: { ok: headBlock !== null, chain_id: deps.chainId, head_block: headBlock },
    indexer: {
      ok: indexedBlock !== null && !reasons.includes("indexer_behind"),
      indexed_block: indexedBlock,
      lag_blocks: lagBlocks,
    },
    payouts,
    backlog,
    checked_at: new Date().toISOString(),
  };
}

/** Null when the backlog cannot be read in time (the database checks above say why). */
async function readBacklog(
  sql: Sql,
  confirmedThrough: bigint | null,
  thresholds: BacklogThresholds,
  timeoutMs: number,
): Promise<BacklogHealth | null> {
  const [matcher, payouts] = await Promise.allSettled([
    confirmedThrough === null
      ? Promise.resolve(null)
      : withTimeout(readMatcherBacklog(sql, confirmedThrough), timeoutMs, "the matcher backlog"),
    withTimeout(readPayoutBacklog(sql), timeoutMs, "the payout backlog"),
  ]);
  if (payouts.status === "rejected") return null;
  const waiting = matcher.status === "fulfilled" ? matcher.value : null;
  const report: BacklogHealth = {
    ok: true,
    matcher: waiting && {
      cursor_block: waiting.cursorBlock,
      waiting_transfers: waiting.waitingTransfers,
      lag_blocks: waiting.lagBlocks,
      oldest_waiting_seconds: waiting.oldestWaitingSeconds,
    },
    payouts: {
      claims_paid: payouts.value.claimsPaid,
      oldest_paid_seconds: payouts.value.oldestPaidSeconds,
      payouts_unfinished: payouts.value.payoutsUnfinished,
      oldest_unfinished_seconds: payouts.value.oldestUnfinishedSeconds,
    },
    max_age_seconds: {
      matcher: thresholds.matcherMaxAgeSeconds,
      payouts: thresholds.payoutMaxAgeSeconds,
    },
  };
  report.ok = backlogReasons(report, thresholds).length === 0;
  return report;
}

function backlogReasons(backlog: BacklogHealth, thresholds: BacklogThresholds): HealthReason[] {
  const olderThan = (age: number | null | undefined, max: number) => age != null && age > max;
  const reasons: HealthReason[] = [];
  if (olderThan(backlog.matcher?.oldest_waiting_seconds, thresholds.matcherMaxAgeSeconds)) {
    reasons.push("matcher_behind");
  }
  if (olderThan(backlog.payouts.oldest_paid_seconds, thresholds.payoutMaxAgeSeconds)) {
    reasons.push("payouts_waiting");
  }
  if (olderThan(backlog.payouts.oldest_unfinished_seconds, thresholds.payoutMaxAgeSeconds)) {
    reasons.push("payouts_unconfirmed");
  }
  return reasons;
}
