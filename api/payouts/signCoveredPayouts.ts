import { erc20Abi, type PrivateKeyAccount, type PublicClient } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Database } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import type { SettleAndPayCode } from "../x402/settleAndPayCode.ts";
import { readPayoutFunding } from "./payoutFunding.ts";
import { hasClaimsToPay, payoutsAheadOfChain } from "./readPayouts.ts";
import { type PayoutTx, signNewPayouts } from "./signNewPayouts.ts";

/** Why no new payout is signed this round (logged once per change, not every round). */
export interface PayoutHold {
  reason: string;
  fields: Record<string, unknown>;
}

export type SignRound = { signed: PayoutTx[] } | { held: PayoutHold };

/**
 * Signs and stores payouts for `paid` claims, as many as the payout wallet's USDC and ETH
 * cover beyond what it already owes; none while the base fee is at the cap, or while stored
 * payouts are ahead of the wallet's nonce on chain. Another sender taking the same nonces
 * (`payouts.nonce` UNIQUE) rolls this round back.
 */
export async function signCoveredPayouts(
  deps: { sql: Database; config: ServiceConfig; settleAndPay?: SettleAndPayCode | undefined },
  rpc: PublicClient,
  account: PrivateKeyAccount,
  timing?: { lap(phase: string): void },
): Promise<SignRound> {
  const { sql, config } = deps;
  if (!(await hasClaimsToPay(sql))) return { signed: [] };
  const [funding, pendingNonce, allowance, settleAgain] = await Promise.all([
    readPayoutFunding({ sql, chain: rpc, config }),
    rpc.getTransactionCount({ address: account.address, blockTag: "pending" }).then(BigInt),
    readSettleAndPayAllowance(rpc, config),
    // As an x402 request decides it (earnWithX402.ts): SETTLE_AND_PAY_ADDRESS set with the local
    // facilitator, and its code verified.
    config.x402.settleAndPay && deps.settleAndPay
      ? deps.settleAndPay.state().then((state) => state === "verified")
      : false,
  ]);
  timing?.lap("funding");
  if (funding.fees.baseFeePerGas >= config.payouts.maxFeePerGas) {
    return {
      held: {
        reason: "base fee at or above PAYOUT_MAX_FEE_GWEI; no payout is signed until it falls",
        fields: { baseFeePerGas: funding.fees.baseFeePerGas.toString() },
      },
    };
  }
  const limit = Math.min(config.payouts.batchSize, funding.coveredByUsdc, funding.coveredByEth);
  if (limit <= 0) {
    return {
      held: {
        reason: "payout wallet cannot fund the next payout; claims wait in paid",
        fields: {
          wallet: funding.wallet,
          usdcBalance: funding.usdcBalance.toString(),
          ethBalance: funding.ethBalance.toString(),
          outstandingPayouts: funding.outstandingPayouts,
          paidClaims: funding.paidClaims,
        },
      },
    };
  }
  if (await payoutsAheadOfChain(sql, funding.latestNonce)) {
    return {
      held: {
        reason: "stored payouts are ahead of the wallet's nonce on chain; signing stops",
        fields: { wallet: funding.wallet, latestNonce: funding.latestNonce.toString() },
      },
    };
  }
  try {
    const signed = await signNewPayouts(sql, account, config, {
      limit,
      pendingNonce,
      fees: funding.fees,
      // Conservative: every payout not mined yet counts against the allowance.
      settleAndPayCovered: Number(allowance / PAYOUT_ATOMIC) - funding.outstandingPayouts,
      settleAgain,
    });
    timing?.lap("sign_and_store");
    return { signed };
  } catch (error) {
    if (!hasSqlState(error, SQL_STATE.uniqueViolation)) throw error;
    return {
      held: {
        reason: "another sender took the same nonces; this round is rolled back",
        fields: {},
      },
    };
  }
}

/**
 * The payout wallet's allowance to SettleAndPay (0 when it is not configured): a settle-and-pay
 * the allowance does not cover would revert, so none is signed beyond it
 * (docs/operating.md#settleandpay-on-base). Which payments settle with their payout was decided
 * when each was recorded, with SettleAndPay's code seen at its address (x402/settleAndPayCode.ts).
 */
async function readSettleAndPayAllowance(
  rpc: PublicClient,
  config: ServiceConfig,
): Promise<bigint> {
  const settleAndPay = config.x402.settleAndPay;
  if (!settleAndPay) return 0n;
  const allowance = await rpc.readContract({
    address: config.chain.usdcAddress,
    abi: erc20Abi,
    functionName: "allowance",
    args: [config.payout.address, settleAndPay.address],
  });
  const cap = BigInt(Number.MAX_SAFE_INTEGER) * PAYOUT_ATOMIC;
  return allowance > cap ? cap : allowance;
}
