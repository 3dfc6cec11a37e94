import { formatEther, type PublicClient } from "viem";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import type { Sql } from "../db/connect.ts";
import { formatUsdcFixed } from "../money.ts";
import type { PayoutFunding } from "../payouts/payoutFunding.ts";

export type HealthStatus = "ok" | "degraded" | "down";

/** Stable snake_case codes; `down` reasons make the report `down`, the rest `degraded`. */
export type HealthReason =
  | "database_unreachable"
  | "rpc_unreachable"
  | "rpc_wrong_chain"
  | "indexer_not_ready"
  | "indexer_behind"
  | "payout_wallet_low_usdc"
  | "payout_wallet_low_eth";

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

export interface HealthDependencies {
  sql: Sql;
  chain: PublicClient;
  chainId: number;
  maxIndexerLagBlocks: number;
  /** The payout wallet's funding (payouts/payoutFunding.ts); without it, `payouts` is null. */
  payoutFunding?: () => Promise<PayoutFunding>;
  timeoutMs?: number;
}

/** Never throws: every failed check becomes a reason in the report. */
export async function checkHealth(deps: HealthDependencies): Promise<HealthReport> {
  const timeoutMs = deps.timeoutMs ?? 2_000;
  const [database, rpc, indexed, funding] = await Promise.allSettled([
    withTimeout(deps.sql`select 1`, timeoutMs),
    withTimeout(Promise.all([deps.chain.getChainId(), deps.chain.getBlockNumber()]), timeoutMs),
    withTimeout(readIndexedBlock(deps.sql, deps.chainId), timeoutMs),
    deps.payoutFunding ? withTimeout(deps.payoutFunding(), timeoutMs) : Promise.resolve(null),
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
    checked_at: new Date().toISOString(),
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
