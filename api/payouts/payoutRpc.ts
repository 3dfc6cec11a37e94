import { createPublicClient, type Hex, http, type PublicClient } from "viem";
import { chainDefinition } from "../chain/publicClient.ts";
import { type BroadcastOutcome, classifyBroadcastError } from "./broadcastError.ts";

/** Requests issued together go out as one JSON-RPC batch of at most this many. */
export const RPC_BATCH_SIZE = 100;

/**
 * The payout path's own client. Requests made in the same tick travel as JSON-RPC batches, so
 * hundreds of raw transactions or receipt lookups cost a handful of round trips.
 */
export function createPayoutRpc(rpcUrl: string, chainId: number): PublicClient {
  return createPublicClient({
    chain: chainDefinition(chainId, rpcUrl),
    // Never a cached block number or nonce: a stale one delays confirmation by seconds.
    cacheTime: 0,
    transport: http(rpcUrl, {
      batch: { batchSize: RPC_BATCH_SIZE, wait: 0 },
      timeout: 10_000,
      retryCount: 1,
    }),
  });
}

/**
 * Sends raw transactions in the order given (callers pass nonce order): one batch at a time, so
 * a later nonce never reaches the node in an earlier request than a lower one. When a whole
 * batch fails to reach the node, the rest are not sent (a later round retries them).
 */
export async function sendRawTransactions(
  rpc: PublicClient,
  rawTransactions: Hex[],
): Promise<BroadcastOutcome[]> {
  const outcomes: BroadcastOutcome[] = [];
  for (let start = 0; start < rawTransactions.length; start += RPC_BATCH_SIZE) {
    const batch = rawTransactions.slice(start, start + RPC_BATCH_SIZE);
    const settled = await Promise.allSettled(
      batch.map((serializedTransaction) => rpc.sendRawTransaction({ serializedTransaction })),
    );
    const batchOutcomes = settled.map(
      (result): BroadcastOutcome =>
        result.status === "fulfilled"
          ? { kind: "accepted" }
          : classifyBroadcastError(result.reason),
    );
    outcomes.push(...batchOutcomes);
    if (
      batchOutcomes.every(
        (outcome) => outcome.kind === "failed" && outcome.code === "rpc_unreachable",
      )
    ) {
      const rest = rawTransactions.length - outcomes.length;
      for (let index = 0; index < rest; index += 1) {
        outcomes.push({ kind: "failed", code: "not_sent", detail: "the RPC did not answer" });
      }
      break;
    }
  }
  return outcomes;
}

/** A mined transaction's outcome, or null when the node does not know it as mined. */
export interface MinedReceipt {
  status: "success" | "reverted";
  blockNumber: bigint;
  blockHash: Hex;
}

/**
 * Receipts for many hashes in a few batched requests. A hash whose lookup failed is absent
 * from the map (unknown); a hash the node does not know as mined maps to null.
 */
export async function readReceipts(
  rpc: PublicClient,
  hashes: Hex[],
): Promise<Map<Hex, MinedReceipt | null>> {
  const settled = await Promise.allSettled(
    hashes.map((hash) => rpc.request({ method: "eth_getTransactionReceipt", params: [hash] })),
  );
  const receipts = new Map<Hex, MinedReceipt | null>();
  settled.forEach((result, index) => {
    const hash = hashes[index] as Hex;
    if (result.status === "rejected") return;
    const receipt = result.value;
    receipts.set(
      hash,
      receipt
        ? {
            status: BigInt(receipt.status) === 1n ? "success" : "reverted",
            blockNumber: BigInt(receipt.blockNumber),
            blockHash: receipt.blockHash,
          }
        : null,
    );
  });
  return receipts;
}
