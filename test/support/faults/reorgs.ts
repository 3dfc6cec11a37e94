import type { Address, Hex } from "viem";
import type { TestChain } from "../chain.ts";

export interface Reorg {
  depth: number;
  /** Transactions mined again in the new blocks (see `placement`). */
  remined: number;
  /** Transactions of the `drop` senders, gone from the chain (their bytes are not re-mined). */
  dropped: Hex[];
}

/**
 * Where the new branch mines the old blocks' transactions again: each one block `later` than
 * before, or all in the branch's first block, so that every one but the first block's is mined
 * `lower` than before (below a matcher's cursor that had passed them).
 */
export type Placement = "later" | "lower";

/**
 * Replaces the last `depth` blocks with new ones (anvil_reorg), as a real reorg does: the
 * transactions of the old blocks are mined again at other heights (`placement`; so their
 * blocks, block hashes and log indices change), except those sent by `drop`, which disappear,
 * as a transaction does when the new branch's builder never saw it. Interval mining is paused
 * while the old blocks are read, so the depth is exactly what was asked.
 */
export async function reorganise(
  chain: TestChain,
  depth: number,
  drop: Address[] = [],
  placement: Placement = "later",
): Promise<Reorg> {
  const dropping = new Set(drop.map((address) => address.toLowerCase()));
  await chain.testClient.setIntervalMining({ interval: 0 });
  try {
    const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
    const first = head - BigInt(depth) + 1n;
    const remine: [Hex, number][] = [];
    const dropped: Hex[] = [];
    for (let number = first; number <= head; number += 1n) {
      const block = await chain.publicClient.getBlock({
        blockNumber: number,
        includeTransactions: true,
      });
      for (const transaction of block.transactions) {
        if (dropping.has(transaction.from.toLowerCase())) {
          dropped.push(transaction.hash);
          continue;
        }
        const raw = (await chain.publicClient.request({
          method: "eth_getRawTransactionByHash" as never,
          params: [transaction.hash] as never,
        })) as Hex;
        const later = Math.min(Number(number - first) + 1, depth - 1);
        remine.push([raw, placement === "lower" ? 0 : later]);
      }
    }
    await chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [depth, remine] as never,
    });
    return { depth, remined: remine.length, dropped };
  } finally {
    await chain.testClient.setIntervalMining({ interval: 1 });
  }
}

/**
 * Waits (while the chain goes on) until `sender` has a transaction in one of the last
 * `withinBlocks` blocks, and returns the reorg depth that takes it away (1: the head). undefined
 * if none came within `timeoutMs`: the reorg then happens anyway, with nothing of theirs in it.
 */
export async function depthOfRecentTransaction(
  chain: TestChain,
  sender: Address,
  withinBlocks: number,
  timeoutMs: number,
): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs;
  const from = sender.toLowerCase();
  while (Date.now() < deadline) {
    const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
    for (let depth = 1; depth <= withinBlocks && BigInt(depth) <= head; depth += 1) {
      const block = await chain.publicClient.getBlock({
        blockNumber: head - BigInt(depth) + 1n,
        includeTransactions: true,
      });
      if (block.transactions.some((transaction) => transaction.from.toLowerCase() === from)) {
        return depth;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return undefined;
}
