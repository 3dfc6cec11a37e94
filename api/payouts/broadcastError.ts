import { BaseError, FeeCapTooLowError, InsufficientFundsError, NonceTooLowError } from "viem";
import { getNodeError } from "viem/utils";
import { isRpcUnavailable } from "../chain/rpcUnavailable.ts";

/**
 * What an `eth_sendRawTransaction` answer means for a payout, decided once here:
 * - `accepted`: the node took the transaction;
 * - `known`: the node has it or has moved past its nonce (`already known`, `nonce too low`,
 *   `replacement transaction underpriced`): as good as broadcast, the confirmer resolves it;
 * - `insufficient_funds`: not enough ETH for its gas: it stays signed until the wallet is funded;
 * - `failed`: anything else (fee cap below the base fee, RPC unreachable, a rejection we do
 *   not know): recorded on the payout and retried later.
 */
export type BroadcastOutcome =
  | { kind: "accepted" }
  | { kind: "known"; code: "already_known" | "nonce_too_low" | "replacement_underpriced" }
  | { kind: "insufficient_funds"; code: "insufficient_funds"; detail: string }
  | {
      kind: "failed";
      code: "fee_cap_too_low" | "rpc_unreachable" | "not_sent" | "rejected";
      detail: string;
    };

// geth, reth, anvil: "replacement transaction underpriced"; erigon: "could not replace existing tx".
const REPLACEMENT_UNDERPRICED =
  /replacement (transaction )?underpriced|could not replace existing/i;
const ALREADY_KNOWN = /already known|already imported|already exists/i;

export function classifyBroadcastError(error: unknown): BroadcastOutcome {
  if (!(error instanceof BaseError)) {
    return { kind: "failed", code: "rejected", detail: String(error).slice(0, 300) };
  }
  const details = error.details ?? error.shortMessage;
  if (REPLACEMENT_UNDERPRICED.test(details)) {
    return { kind: "known", code: "replacement_underpriced" };
  }
  if (isRpcUnavailable(error)) {
    return { kind: "failed", code: "rpc_unreachable", detail: error.shortMessage };
  }
  const nodeError = getNodeError(error, {});
  if (nodeError instanceof NonceTooLowError) {
    return { kind: "known", code: ALREADY_KNOWN.test(details) ? "already_known" : "nonce_too_low" };
  }
  if (nodeError instanceof InsufficientFundsError) {
    return { kind: "insufficient_funds", code: "insufficient_funds", detail: details };
  }
  if (nodeError instanceof FeeCapTooLowError) {
    return { kind: "failed", code: "fee_cap_too_low", detail: details };
  }
  return { kind: "failed", code: "rejected", detail: details.slice(0, 300) };
}

/** The text stored in `payouts.last_error` for an outcome that was not a clean acceptance. */
export function describeOutcome(outcome: BroadcastOutcome): string | null {
  switch (outcome.kind) {
    case "accepted":
      return null;
    case "known":
      return outcome.code;
    default:
      return `${outcome.code}: ${outcome.detail}`;
  }
}
