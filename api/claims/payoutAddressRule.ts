import { type Address, zeroAddress } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";

/**
 * Addresses a payout must never go to: burnt, stuck in a contract, or back to ourselves.
 * The words, or null when the address may receive a payout.
 */
export function refusedPayoutAddress(
  config: Pick<ServiceConfig, "chain" | "payout">,
  address: Address,
): string | null {
  const { chain, payout } = config;
  const lower = address.toLowerCase();
  if (lower === zeroAddress) return "the zero address cannot receive a payout";
  if (lower === chain.usdcAddress.toLowerCase()) return "the USDC contract cannot receive a payout";
  if (lower === chain.payTo.toLowerCase()) return "pay_to is the service's own address";
  if (lower === payout.address.toLowerCase()) return "that is the service's payout wallet";
  return null;
}
