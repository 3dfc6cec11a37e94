import { afterEach, describe, expect, it, vi } from "vitest";
import { createCompletionSignal, waitForClaim } from "../../api/claims/waitForClaim.ts";
import type { Sql } from "../../api/db/connect.ts";

/**
 * The x402 answer waits for its claim's payout: a completion anywhere wakes the wait at once,
 * instead of the next poll. Timers are fake and never advanced: only the signal can wake it.
 */

afterEach(() => {
  vi.useRealTimers();
});

/** A database that answers the claim's status from `statuses`, one read after the other. */
function claimStatuses(statuses: string[]) {
  const reads: string[] = [];
  const sql = (() => {
    const status = statuses[Math.min(reads.length, statuses.length - 1)] as string;
    reads.push(status);
    return Promise.resolve([{ status }]);
  }) as unknown as Sql;
  return { sql, reads };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("waitForClaim", () => {
  it("reads the claim again as soon as a completion is signalled", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const { sql, reads } = claimStatuses(["paying", "completed"]);
    const completions = createCompletionSignal();

    const waiting = waitForClaim(sql, "claim", 60_000, completions);
    await settle();
    expect(reads).toEqual(["paying"]);
    completions.notify();

    await expect(waiting).resolves.toBe("completed");
    expect(reads).toEqual(["paying", "completed"]);
  });

  it("still reads again when no signal comes (a failure sends none)", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const { sql, reads } = claimStatuses(["paying", "failed"]);
    const waiting = waitForClaim(sql, "claim", 60_000, createCompletionSignal());
    await settle();
    expect(reads).toEqual(["paying"]);

    await vi.advanceTimersByTimeAsync(100);

    await expect(waiting).resolves.toBe("failed");
  });

  it("gives the status it has when the time is up", async () => {
    const { sql } = claimStatuses(["paying"]);
    await expect(waitForClaim(sql, "claim", 0, createCompletionSignal())).resolves.toBe("paying");
  });
});

describe("createCompletionSignal", () => {
  it("wakes every waiter once and forgets them", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const completions = createCompletionSignal();
    const woken: number[] = [];
    const first = completions.next(60_000).then(() => woken.push(1));
    const second = completions.next(60_000).then(() => woken.push(2));
    completions.notify();
    await Promise.all([first, second]);
    expect(woken.sort()).toEqual([1, 2]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
