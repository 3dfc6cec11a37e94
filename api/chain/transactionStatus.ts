import type { Hex } from "viem";
import type { PublicChainReads } from "./publicChainReads.ts";

/** What the chain says of a transaction right now. */
export interface TransactionStatus {
  /** `unknown`: the RPC could not be asked. */
  state: "on_chain" | "reverted" | "not_found" | "unknown";
  blockNumber: bigint | null;
  /** Blocks on top of its block, counting from 0; null unless mined. */
  confirmations: number | null;
}

/**
 * Mined (successfully or not) in the canonical chain, or not known to it; `unknown` when the
 * RPC fails or the public reads are busy. Never throws.
 */
export async function readTransactionStatus(
  reads: PublicChainReads,
  hash: Hex,
): Promise<TransactionStatus> {
  try {
    const [receipt, head] = await Promise.all([reads.receipt(hash), reads.head()]);
    if (!receipt) return { state: "not_found", blockNumber: null, confirmations: null };
    return {
      state: receipt.status === "success" ? "on_chain" : "reverted",
      blockNumber: receipt.blockNumber,
      confirmations: Math.max(0, Number(head - receipt.blockNumber)),
    };
  } catch {
    return { state: "unknown", blockNumber: null, confirmations: null };
  }
}
