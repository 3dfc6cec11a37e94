import { BaseError, HttpRequestError, TimeoutError } from "viem";

/**
 * Whether an error is the chain's RPC not answering (unreachable, timed out, or failing at the
 * HTTP level), as opposed to an answer we did not like: a reason to retry later, not a bug.
 */
export function isRpcUnavailable(error: unknown): boolean {
  if (!(error instanceof BaseError)) return false;
  return Boolean(
    error.walk((cause) => cause instanceof HttpRequestError || cause instanceof TimeoutError),
  );
}
