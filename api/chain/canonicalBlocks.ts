import { numberToHex, type PublicClient } from "viem";

/**
 * Which of these (block number, hash) pairs the chain still has: the block at that height is
 * the one with that hash. Read in parallel, one header per distinct block.
 */
export async function canonicalBlocks(
  chain: PublicClient,
  blocks: { blockNumber: bigint; blockHash: string }[],
): Promise<Set<string>> {
  const distinct = new Map(
    blocks.map((block) => [`${block.blockNumber}:${block.blockHash}`, block]),
  );
  const canonical = new Set<string>();
  await Promise.all(
    [...distinct].map(async ([key, block]) => {
      const header = await chain.getBlock({ blockNumber: block.blockNumber }).catch(() => null);
      if (header?.hash?.toLowerCase() === block.blockHash.toLowerCase()) canonical.add(key);
    }),
  );
  return canonical;
}

/** The hash of the block at each height (null: the node has none there); absent: no answer. */
export async function blockHashesAt(rpc: PublicClient, heights: bigint[]) {
  const hashes = new Map<bigint, string | null>();
  await Promise.all(
    heights.map(async (height) => {
      const block = await rpc
        .request({ method: "eth_getBlockByNumber", params: [numberToHex(height), false] })
        .catch(() => undefined);
      if (block === undefined) return;
      hashes.set(height, block?.hash ? block.hash.toLowerCase() : null);
    }),
  );
  return hashes;
}
