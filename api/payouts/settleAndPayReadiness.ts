import { type Address, erc20Abi, type PublicClient } from "viem";
import type { Sql } from "../db/connect.ts";
import { createLogger } from "../logger.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import { settleAndPayCode } from "../x402/settleAndPayCode.ts";

/**
 * Why a new settle-and-pay could not be sent with these settings now, or null when it can:
 * SETTLE_AND_PAY_ADDRESS set (with the local facilitator), SettleAndPay's code verified there
 * (x402/settleAndPayCode.ts), and the payout wallet's allowance to it covering one more beyond
 * the payouts not mined yet, as the sender counts it (signCoveredPayouts.ts). The operator's
 * re-issue (reissueSettleAndPay.ts) runs with the command's settings, which may not be the
 * running service's: it settles again only when its own look at the chain says the sender can,
 * and the sender checks again for itself before it signs (signNewPayouts.ts).
 */
export async function whySettleAndPayCannotBeSent(
  deps: {
    sql: Sql;
    usdc: Address;
    wallet: Address;
    settleAndPay: { address: Address } | null;
  },
  rpc: PublicClient,
): Promise<string | null> {
  const { settleAndPay } = deps;
  if (!settleAndPay) {
    return "SETTLE_AND_PAY_ADDRESS is not set in this command's settings (or X402_FACILITATOR is not local), so the payout sender would never send the new settle-and-pay; run it with the service's settings";
  }
  // The command's own check, silent: its answer is this function's.
  const code = await settleAndPayCode(rpc, settleAndPay, createLogger("silent")).state();
  if (code !== "verified") {
    return `SETTLE_AND_PAY_ADDRESS ${settleAndPay.address} does not hold SettleAndPay's code (${code}): a settle-and-pay sent there would settle nothing and pay nothing (docs/operating.md#settleandpay-on-base)`;
  }
  const [allowance, latestNonce] = await Promise.all([
    rpc.readContract({
      address: deps.usdc,
      abi: erc20Abi,
      functionName: "allowance",
      args: [deps.wallet, settleAndPay.address],
    }),
    rpc.getTransactionCount({ address: deps.wallet, blockTag: "latest" }).then(BigInt),
  ]);
  const [row] = await deps.sql<{ outstanding: bigint }[]>`
    select count(*) as outstanding from app.payouts
    where status in ('signed', 'broadcast') and nonce >= ${latestNonce}`;
  const outstanding = BigInt(row?.outstanding ?? 0n);
  if (allowance / PAYOUT_ATOMIC <= outstanding) {
    return `the payout wallet's allowance to SettleAndPay (${allowance} atomic units) does not cover one more settle-and-pay beyond the ${outstanding} payouts not mined yet; raise it (docs/operating.md#settleandpay-on-base) and run this again`;
  }
  return null;
}
