import { AsyncLocalStorage } from "node:async_hooks";
import { BaseError, ContractFunctionRevertedError } from "viem";

/**
 * The x402 SDK's local verification reads the chain (the payer's code, a simulated
 * `transferWithAuthorization`, balances) and turns any failed read into a verdict: a `getCode`
 * that throws becomes `invalid_exact_evm_signature`, a simulation that throws becomes
 * `..._simulation_failed`. A node that did not answer is then indistinguishable from a bad
 * payment, and a valid payment would be refused for good (402) over a passing RPC hiccup.
 * So the reads a verification makes are watched: if one failed for want of an answer (not a
 * revert, which is the chain's verdict), a refusal from that verification is not believed.
 */
const watch = new AsyncLocalStorage<{ unanswered: unknown[] }>();

/** Thrown instead of a refusal the RPC may have caused: the caller answers 503, not 402. */
export class VerifyUnreliableError extends Error {
  constructor(cause: unknown) {
    super("an RPC read failed while the payment was verified; its refusal is not trusted", {
      cause,
    });
    this.name = "VerifyUnreliableError";
  }
}

/** A chain read whose failures count against the verification it runs in. */
export function watchedRead<Args, Result>(
  read: (args: Args) => Promise<Result>,
): (args: Args) => Promise<Result> {
  return async (args) => {
    try {
      return await read(args);
    } catch (error) {
      if (!isRevert(error)) watch.getStore()?.unanswered.push(error);
      throw error;
    }
  };
}

/** Runs a verification; a refusal (an invalid verdict or a throw) after an unanswered read throws VerifyUnreliableError. */
export async function verifyWatched<Verdict extends { isValid: boolean }>(
  verify: () => Promise<Verdict>,
): Promise<Verdict> {
  const reads = { unanswered: [] as unknown[] };
  return watch.run(reads, async () => {
    let verdict: Verdict;
    try {
      verdict = await verify();
    } catch (error) {
      if (reads.unanswered.length > 0) throw new VerifyUnreliableError(reads.unanswered[0]);
      throw error;
    }
    if (!verdict.isValid && reads.unanswered.length > 0) {
      throw new VerifyUnreliableError(reads.unanswered[0]);
    }
    return verdict;
  });
}

/**
 * The SDK verifies again inside `settle`, before sending; a refusal there after an unanswered
 * read is tried again (nothing was sent: an EIP-3009 authorization moves money at most once
 * anyway), and if the reads still go unanswered the outcome is reported as not known
 * (`errorMessage`), never as a refusal: the claim stays on record and the chain decides.
 */
export async function settleWatched<Answer extends { success: boolean; errorMessage?: string }>(
  settle: () => Promise<Answer>,
  attempts = 3,
): Promise<Answer> {
  for (let attempt = 1; ; attempt += 1) {
    const reads = { unanswered: [] as unknown[] };
    let answer: Answer | undefined;
    try {
      answer = await watch.run(reads, settle);
    } catch (error) {
      if (reads.unanswered.length === 0) throw error;
    }
    const refusedOnReads =
      reads.unanswered.length > 0 && (!answer || (!answer.success && !answer.errorMessage));
    if (answer && !refusedOnReads) return answer;
    if (attempt >= attempts) {
      throw new VerifyUnreliableError(reads.unanswered[0]);
    }
    await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
  }
}

/** The chain answered and said no (execution reverted): a verdict, not an outage. */
function isRevert(error: unknown): boolean {
  if (!(error instanceof BaseError)) return false;
  return Boolean(
    error.walk(
      (cause) =>
        cause instanceof ContractFunctionRevertedError ||
        (cause as { code?: unknown }).code === 3 ||
        /execution reverted/i.test((cause as { details?: string }).details ?? ""),
    ),
  );
}
