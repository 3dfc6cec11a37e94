import type { Sql } from "../db/connect.ts";
import { isFinalClaimStatus } from "../schemas/claimStatus.ts";

/** Without a signal (or between signals: a failure sends none), the status is read this often. */
const POLL_MS = 25;
const POLL_WITH_SIGNAL_MS = 100;

/**
 * Wakes those waiting for a claim's outcome when any claim completes: the composition root
 * calls `notify` on the completion NOTIFY, which arrives in every process whichever runs the
 * payout workers.
 */
export interface CompletionSignal {
  notify(): void;
  /** Settles at the next `notify`, or after `maxMs`. */
  next(maxMs: number): Promise<void>;
}

export function createCompletionSignal(): CompletionSignal {
  const waiters = new Set<() => void>();
  return {
    notify() {
      const woken = [...waiters];
      waiters.clear();
      for (const wake of woken) wake();
    },
    next(maxMs) {
      return new Promise((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, maxMs);
        waiters.add(wake);
      });
    },
  };
}

/**
 * Waits, at most `timeoutMs`, for a claim's status to be final (a paid claim's: completed or
 * failed); returns its status. The database says; the signal says when to ask again (polling
 * every 25 ms without one).
 */
export async function waitForClaim(
  sql: Sql,
  claimId: string,
  timeoutMs: number,
  completions?: CompletionSignal,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // Armed before the read: a completion committed while the read is under way still wakes it.
    const woken = completions?.next(Math.min(POLL_WITH_SIGNAL_MS, deadline - Date.now()));
    const [row] = await sql<
      { status: string }[]
    >`select status from app.claims where id = ${claimId}`;
    const status = row?.status ?? "unknown";
    if (isFinalClaimStatus(status) || Date.now() >= deadline) return status;
    await (woken ?? new Promise((resolve) => setTimeout(resolve, POLL_MS)));
  }
}
