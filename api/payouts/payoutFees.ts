import { hexToBigInt, type PublicClient } from "viem";

export interface PayoutFees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export interface CurrentFees extends PayoutFees {
  /** The higher of the latest block's base fee and the next block's. */
  baseFeePerGas: bigint;
}

/** When the RPC has no `eth_maxPriorityFeePerGas`: 0.01 gwei, ample on Base. */
const DEFAULT_PRIORITY_FEE = 10_000_000n;

/**
 * Fees for a payout signed now: tip from `eth_maxPriorityFeePerGas`, max fee 2 × base fee + tip
 * (room for several full blocks of base fee increases), both capped at `cap`.
 * `eth_feeHistory` gives the latest block's base fee and the next one's.
 */
export async function readCurrentFees(chain: PublicClient, cap: bigint): Promise<CurrentFees> {
  const [history, tip] = await Promise.all([
    chain.getFeeHistory({ blockCount: 1, rewardPercentiles: [] }),
    chain
      .request({ method: "eth_maxPriorityFeePerGas" })
      .then((value) => hexToBigInt(value))
      .catch(() => DEFAULT_PRIORITY_FEE),
  ]);
  const baseFeePerGas = history.baseFeePerGas.reduce((high, fee) => max(high, fee), 0n);
  const maxFeePerGas = min(cap, 2n * baseFeePerGas + tip);
  return { baseFeePerGas, maxFeePerGas, maxPriorityFeePerGas: min(tip, maxFeePerGas) };
}

/**
 * Fees for a same-nonce replacement: at least 25 % over the previous attempt and at least what
 * a new payout would pay now, capped at `cap`. Null when the cap leaves no room for a bump a
 * node accepts (geth and its forks want both fees ≥ 10 % higher): keep re-broadcasting then.
 */
export function replacementFees(
  previous: PayoutFees,
  current: PayoutFees,
  cap: bigint,
): PayoutFees | null {
  const maxFeePerGas = min(cap, max(bump(previous.maxFeePerGas), current.maxFeePerGas));
  const maxPriorityFeePerGas = min(
    maxFeePerGas,
    max(bump(previous.maxPriorityFeePerGas), current.maxPriorityFeePerGas),
  );
  const accepted =
    maxFeePerGas * 100n >= previous.maxFeePerGas * 110n &&
    maxPriorityFeePerGas * 100n >= previous.maxPriorityFeePerGas * 110n;
  return accepted ? { maxFeePerGas, maxPriorityFeePerGas } : null;
}

/** +25 %, rounded up. */
function bump(value: bigint): bigint {
  return (value * 125n + 99n) / 100n;
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
