import { type Address, keccak256, type PublicClient } from "viem";
import { settleAndPayArtifact } from "../../contracts-abi/artifacts.ts";
import type { Logger } from "../logger.ts";
import { withTimeout } from "../withTimeout.ts";

/** How long an answer that the address holds other code is kept before the chain is asked again. */
const RECHECK_WRONG_CODE_MS = 60_000;
/** How long a failed read is kept: the next request or health check after it asks again. */
const RECHECK_UNREADABLE_MS = 5_000;
/** The longest an x402 request waits for the answer; unanswered, it settles in two transactions. */
const CHECK_TIMEOUT_MS = 2_000;

/**
 * What SETTLE_AND_PAY_ADDRESS holds: SettleAndPay's code as built from
 * contracts-abi/SettleAndPay.sol (its constructor is empty, it has no immutables and its build
 * keeps no metadata hash, so its code on chain is the artifact's deployed bytecode, byte for
 * byte); other code or none; or the chain could not say.
 */
export type SettleAndPayCodeState = "verified" | "wrong_code" | "unreadable" | "not_configured";

export interface SettleAndPayCode {
  /**
   * Asks the chain unless an answer is fresh. Once the code is seen it is trusted for the
   * process's life: code at an address does not change after it is deployed.
   */
  state(): Promise<SettleAndPayCodeState>;
}

/**
 * A call to an address without code is mined and does nothing: a settle-and-pay sent to the wrong
 * address would neither settle nor pay, and its claim would wait until the authorization lapsed.
 * So an x402 payment is recorded to settle with its payout only while this says `verified`
 * (the payout sender then trusts the record), and health says when it does not
 * (docs/operating.md#settleandpay-on-base).
 */
export function settleAndPayCode(
  chain: Pick<PublicClient, "getCode">,
  settleAndPay: { address: Address } | null,
  logger: Logger,
): SettleAndPayCode {
  const expected = settleAndPayArtifact.deployedBytecode.toLowerCase();
  let current: SettleAndPayCodeState | undefined;
  let checkedAt = Number.NEGATIVE_INFINITY;
  let asking: Promise<SettleAndPayCodeState> | undefined;

  function report(state: SettleAndPayCodeState, fields: Record<string, unknown>): void {
    if (state === current) return;
    if (state === "verified") logger.info(fields, "SettleAndPay's code is at its address");
    else if (state === "wrong_code") {
      logger.error(
        { ...fields, expected_code_hash: keccak256(settleAndPayArtifact.deployedBytecode) },
        "SettleAndPay is not used: its address does not hold the code this version was built with",
      );
    } else logger.warn(fields, "SettleAndPay's code cannot be read; x402 settles first meanwhile");
  }

  async function ask(address: Address): Promise<SettleAndPayCodeState> {
    let state: SettleAndPayCodeState;
    let fields: Record<string, unknown> = { address };
    try {
      const code = await withTimeout(chain.getCode({ address }), CHECK_TIMEOUT_MS, "getCode");
      state = code?.toLowerCase() === expected ? "verified" : "wrong_code";
      fields = { ...fields, found_code_hash: code ? keccak256(code) : null };
    } catch (error) {
      state = "unreadable";
      fields = { ...fields, err: error };
    }
    report(state, fields);
    current = state;
    checkedAt = Date.now();
    return state;
  }

  return {
    state() {
      if (!settleAndPay) return Promise.resolve("not_configured");
      if (current === "verified") return Promise.resolve(current);
      const freshFor = current === "wrong_code" ? RECHECK_WRONG_CODE_MS : RECHECK_UNREADABLE_MS;
      if (current && Date.now() - checkedAt < freshFor) return Promise.resolve(current);
      asking ??= ask(settleAndPay.address).finally(() => {
        asking = undefined;
      });
      return asking;
    },
  };
}
