import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultForm, type FaultRun, startFaultRun } from "./faultRun.ts";

/**
 * The short form's whole run took 414-474 s, and once over 600 s, beside the rest of the suite
 * on a slow 2-core VM (BENCHMARKS.md#test-suite). It runs beside the other tests, about 22 min
 * there, so a longer limit lengthens CI only for a run that hangs.
 */
const RUN_TIMEOUT_MS = process.env.FAULTS === "long" ? 3_600_000 : 1_200_000;

/**
 * Proof under faults (RELIABILITY.md): payments stream in by every flow while the service is
 * SIGKILLed and restarted, its RPC fails, PostgreSQL restarts, the chain reorganises (shallower
 * and deeper than CONFIRMATIONS, and once taking a mined payout away), Ponder restarts and
 * re-indexes on a new build schema, and the replica holding the payout lock is killed. Then,
 * from the chain and the database: every payment earned exactly one payout, nothing else, and
 * every claim opened by mail and completed had its receipt mailed.
 * `FAULTS=long` runs the long form (≥ 50 SIGKILL cycles).
 *
 * One file per matching variant, so that the two runs go side by side: each has its own chain,
 * PostgreSQL, Ponder and service processes, and mostly waits on its one-second blocks.
 */
export function describeFaultSuite(variant: "A" | "B") {
  const form: FaultForm = process.env.FAULTS === "long" ? "long" : "short";

  describe(`variant ${variant} under faults`, () => {
    let run: FaultRun | undefined;

    beforeAll(async () => {
      run = await startFaultRun(variant, form);
    });

    afterAll(async () => {
      await run?.stop();
    });

    it(
      "pays every qualifying payment exactly once and nothing else",
      async () => {
        if (!run) throw new Error("the fault run did not start");
        const current = run;
        // A run still going a minute before the test's timeout says where it stands and keeps the
        // service processes' output; vitest's own timeout would say neither.
        let deadline: NodeJS.Timeout | undefined;
        const outOfTime = new Promise<never>((_resolve, reject) => {
          deadline = setTimeout(
            () => reject(new Error(`the fault run was still at ${current.phase()}`)),
            RUN_TIMEOUT_MS - 60_000,
          );
        });
        await Promise.race([current.run(), outOfTime])
          .finally(() => clearTimeout(deadline))
          .catch(async (error: Error) => {
            const saved = await current.saveServiceOutput();
            throw new Error(`${error.message}\n(every service process's output: ${saved})`, {
              cause: error,
            });
          });
        const report = await run.report();
        console.log(
          `fault suite, variant ${variant}, ${form} form:\n${JSON.stringify(report, null, 2)}`,
        );

        if (report.verdict.discrepancies.length > 0) {
          console.error(`every service process's output: ${await current.saveServiceOutput()}`);
        }
        expect(report.verdict.discrepancies, run.serviceOutput()).toEqual([]);
        // Every state change's event reached the operator's receiver, in order per claim.
        expect(report.webhooks.discrepancies).toEqual([]);
        expect(report.webhooks.events).toBeGreaterThan(report.verdict.qualifyingPayments);
        expect(report.webhooks.delivered).toBe(report.webhooks.events);
        // The run proves something only if the faults and the payments happened.
        expect(report.faults.sigkill).toBeGreaterThanOrEqual(form === "long" ? 50 : 4);
        expect(report.faults.reorg_dropping_payout).toBeGreaterThan(0);
        expect(report.faults.payouts_dropped_by_reorg).toBeGreaterThan(0);
        expect(Object.values(report.faults.rpc).every((count) => count > 0)).toBe(true);
        expect(report.verdict.qualifyingPayments).toBeGreaterThan(10);
        expect(report.verdict.payouts).toBe(report.verdict.qualifyingPayments);
        // The mail lane ran: claims opened by mail were paid, completed and their receipts mailed.
        expect(report.verdict.mailClaimsCompleted).toBeGreaterThan(0);
        // The standby takes the payout lock within seconds of the holder's death.
        for (const ms of report.takeoverMs) expect(ms).toBeLessThan(10_000);
      },
      RUN_TIMEOUT_MS,
    );
  });
}
