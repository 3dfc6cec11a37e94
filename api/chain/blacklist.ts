import type { Address, PublicClient } from "viem";

/**
 * USDC (FiatToken) refuses transfers to and from blacklisted accounts, for good: the one
 * revert of a payout that no retry can cure. Kept apart from contracts-abi/usdc.ts, which the
 * indexer's build id hashes (a change there would re-index from the start block).
 */
const isBlacklistedAbi = [
  {
    type: "function",
    name: "isBlacklisted",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ name: "", type: "bool" }],
  },
] as const;

/** Whether the token blacklists `account` at `blockNumber`; null when the token cannot say. */
export async function isBlacklisted(
  chain: PublicClient,
  token: Address,
  account: Address,
  blockNumber: bigint,
): Promise<boolean | null> {
  try {
    return await chain.readContract({
      address: token,
      abi: isBlacklistedAbi,
      functionName: "isBlacklisted",
      args: [account],
      blockNumber,
    });
  } catch {
    return null;
  }
}
