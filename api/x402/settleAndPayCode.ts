import type { Address, PublicClient } from "viem";
import { settleAndPayArtifact } from "../../contracts-abi/artifacts.ts";
import type { Logger } from "../logger.ts";

/** How long a failed or mismatched check is kept before the chain is asked again. */
const RECHECK_AFTER_MS = 60_000;

export interface SettleAndPayCode {
  /**
   * Whether SETTLE_AND_PAY_ADDRESS holds SettleAndPay's code, as built from
   * contracts-abi/SettleAndPay.sol (its constructor is empty and it has no immutables, so its
   * code on chain is the artifact's deployed bytecode, byte for byte). False when SettleAndPay
   * is not configured, or the chain cannot say. Once the code is seen it is trusted for the
   * process's life: code at an address does not change after it is deployed.
   */
  usable(): Promise<boolean>;
}

/**
 * A call to an address without code "succeeds" doing nothing: a settle-and-pay sent to the wrong
 * address would be mined, neither settle nor pay, and leave its claim waiting until the
 * authorization lapses. So both the x402 path and the payout sender ask this first, and pay in
 * two transactions while it says no (docs/payments.md#one-transaction-settlement).
 */
export function settleAndPayCode(
  chain: Pick<PublicClient, "getCode">,
  settleAndPay: { address: Address } | null,
  logger: Logger,
): SettleAndPayCode {
  const expected = settleAndPayArtifact.deployedBytecode.toLowerCase();
  let verified = false;
  let checkedAt = Number.NEGATIVE_INFINITY;
  let last: Promise<boolean> | undefined;
  let reported: string | undefined;

  function report(state: string, fields: Record<string, unknown>): void {
    if (state === reported) return;
    reported = state;
    if (state === "verified") logger.info(fields, "SettleAndPay's code is at its address");
    else logger.error(fields, `SettleAndPay is not used: ${state}`);
  }

  async function check(address: Address): Promise<boolean> {
    try {
      const code = (await chain.getCode({ address }))?.toLowerCase();
      verified = code === expected;
      if (verified) report("verified", { address });
      else
        report(code ? "another contract's code is at its address" : "its address holds no code", {
          address,
        });
      return verified;
    } catch (error) {
      report("its code cannot be read", { address, err: error });
      return false;
    }
  }

  return {
    usable() {
      if (!settleAndPay) return Promise.resolve(false);
      if (verified) return Promise.resolve(true);
      if (last && Date.now() - checkedAt < RECHECK_AFTER_MS) return last;
      checkedAt = Date.now();
      last = check(settleAndPay.address);
      return last;
    },
  };
}
