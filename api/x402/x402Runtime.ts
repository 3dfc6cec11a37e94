import type { PublicClient } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Logger } from "../logger.ts";
import { createFacilitator, type Facilitator } from "./facilitator.ts";
import { type SettleAndPayCode, settleAndPayCode } from "./settleAndPayCode.ts";
import { prepareX402Terms, type X402Terms } from "./x402Terms.ts";

/** What any transport needs to take an x402 payment: the facilitator and our terms. */
export interface X402Runtime {
  facilitator: Facilitator;
  /** Built on first use and kept; a failure (facilitator down) is retried on the next call. */
  terms(): Promise<X402Terms>;
  /** Whether the payout may settle in its own transaction (SETTLE_AND_PAY_ADDRESS checked). */
  settleAndPay: SettleAndPayCode;
}

/**
 * Built once per process by the composition root (api/service.ts) and shared by every
 * transport that carries x402 (HTTP, MCP, A2A). Null when x402 is switched off.
 */
export function createX402Runtime(
  config: ServiceConfig,
  chain: Pick<PublicClient, "getCode">,
  logger: Logger,
): X402Runtime | null {
  const facilitator = createFacilitator(config);
  if (!facilitator) return null;
  let terms: Promise<X402Terms> | undefined;
  const settleAndPay = settleAndPayCode(chain, config.x402.settleAndPay, logger);
  // Asked at start, so that the first x402 request need not wait for the answer.
  if (facilitator.kind === "local") void settleAndPay.state();
  return {
    facilitator,
    settleAndPay,
    terms() {
      terms ??= prepareX402Terms(config, facilitator.client).catch((error: unknown) => {
        terms = undefined;
        throw error;
      });
      return terms;
    },
  };
}
