import type { PublicClient } from "viem";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import type { Sql } from "../db/connect.ts";

export type HealthStatus = "ok" | "degraded" | "down";

/** Stable snake_case codes; `down` reasons make the report `down`, the rest `degraded`. */
export type HealthReason =
  | "database_unreachable"
  | "rpc_unreachable"
  | "rpc_wrong_chain"
  | "indexer_not_ready"
  | "indexer_behind";

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
  checked_at: string;
}

export interface HealthDependencies {
  sql: Sql;
  chain: PublicClient;
  chainId: number;
  maxIndexerLagBlocks: number;
  timeoutMs?: number;
}

/** Never throws: every failed check becomes a reason in the report. */
export async function checkHealth(deps: HealthDependencies): Promise<HealthReport> {
  const timeoutMs = deps.timeoutMs ?? 2_000;
  const [database, rpc, indexed] = await Promise.allSettled([
    withTimeout(deps.sql`select 1`, timeoutMs),
    withTimeout(Promise.all([deps.chain.getChainId(), deps.chain.getBlockNumber()]), timeoutMs),
    withTimeout(readIndexedBlock(deps.sql, deps.chainId), timeoutMs),
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
