import type { Address, PublicClient } from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import { type CurrentFees, readCurrentFees } from "./payoutFees.ts";

export interface PayoutFunding {
  wallet: Address;
  usdcBalance: bigint;
  ethBalance: bigint;
  /** The wallet's mined transaction count: payouts below it are mined, the rest are not. */
  latestNonce: bigint;
  /** Claims waiting in `paid` for a payout. */
  paidClaims: number;
  /** Payouts signed or broadcast whose outcome is not stored yet. */
  unfinishedPayouts: number;
  /** Unfinished payouts not mined yet: their USDC and gas are still to be spent. */
  outstandingPayouts: number;
  fees: CurrentFees;
  /** The most gas one payout can cost at the current fees. */
  gasCostPerPayout: bigint;
  /** How many more payouts the balances cover beyond the outstanding ones (may be ≤ 0). */
  coveredByUsdc: number;
  coveredByEth: number;
}

/** Payouts confirmed per day over the last `days` days: how fast the wallet is spent. */
export async function readPayoutsPerDay(sql: Sql, days: number): Promise<number> {
  const [row] = await sql<{ payouts: number }[]>`
    select count(*)::int as payouts from app.payouts
    where status = 'confirmed' and confirmed_at > now() - make_interval(days => ${days})`;
  return (row?.payouts ?? 0) / days;
}

/**
 * What the payout wallet holds against what it still owes. The sender signs only as many
 * payouts as both balances cover; health reports the same numbers.
 */
export async function readPayoutFunding(deps: {
  sql: Sql;
  chain: PublicClient;
  config: ServiceConfig;
}): Promise<PayoutFunding> {
  const { config, chain } = deps;
  const wallet = config.payout.address;
  // One block for all three: a balance read at one block and a nonce at another could count a
  // payout as owed that was already paid (or the other way round) and sign more than is there.
  const blockNumber = await chain.getBlockNumber({ cacheTime: 0 });
  const [usdcBalance, ethBalance, latestNonce, fees] = await Promise.all([
    chain.readContract({
      address: config.chain.usdcAddress,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [wallet],
      blockNumber,
    }),
    chain.getBalance({ address: wallet, blockNumber }),
    chain.getTransactionCount({ address: wallet, blockNumber }).then(BigInt),
    readCurrentFees(chain, config.payouts.maxFeePerGas),
  ]);
  const counts = await readPayoutCounts(deps.sql, latestNonce);
  const outstandingPayouts = counts.outstanding;
  const gasCostPerPayout = mostGasOfOnePayout(config) * fees.maxFeePerGas;
  return {
    wallet,
    usdcBalance,
    ethBalance,
    latestNonce,
    paidClaims: counts.paid,
    unfinishedPayouts: counts.unfinished,
    outstandingPayouts,
    fees,
    gasCostPerPayout,
    coveredByUsdc: coveredBy(usdcBalance, PAYOUT_ATOMIC, outstandingPayouts),
    coveredByEth: coveredBy(
      ethBalance - config.payouts.minEthBalance,
      gasCostPerPayout,
      outstandingPayouts,
    ),
  };
}

/**
 * Claims paid and waiting for a payout, payouts signed or broadcast and not yet settled, and
 * those of them at or above the wallet's mined nonce (owed from its balance). Only the unfinished
 * payouts are read (the partial index `payouts_unfinished`): a count filtered in the select list
 * read every payout ever made, 1.7 GB at a year, on every signing round and health check
 * (BENCHMARKS.md#a-year-of-traffic).
 */
export async function readPayoutCounts(
  sql: Sql,
  latestNonce: bigint,
): Promise<{ paid: number; unfinished: number; outstanding: number }> {
  const [row] = await sql<{ paid: bigint; unfinished: bigint; outstanding: bigint }[]>`
    select
      (select count(*) from app.claims where status = 'paid') as paid,
      count(*) as unfinished,
      count(*) filter (where nonce >= ${latestNonce}) as outstanding
    from app.payouts
    where status in ('signed', 'broadcast')`;
  return {
    paid: Number(row?.paid ?? 0n),
    unfinished: Number(row?.unfinished ?? 0n),
    outstanding: Number(row?.outstanding ?? 0n),
  };
}

/**
 * A payout is a plain transfer or, with SettleAndPay, the x402 settlement and the payout in one
 * transaction, which may burn its own, higher gas limit: the ETH each one is covered by is that of
 * the dearer, whichever the next ones turn out to be.
 */
export function mostGasOfOnePayout(config: ServiceConfig): bigint {
  const settleAndPay = config.x402.settleAndPay?.gasLimit ?? 0n;
  return settleAndPay > config.payouts.gasLimit ? settleAndPay : config.payouts.gasLimit;
}

/** Whole payouts `available` pays for at `costEach`, minus those already owed. */
function coveredBy(available: bigint, costEach: bigint, owed: number): number {
  if (available < 0n) return -owed - 1;
  if (costEach === 0n) return Number.MAX_SAFE_INTEGER;
  const units = available / costEach;
  return (units > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(units)) - owed;
}
