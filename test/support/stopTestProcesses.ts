import {
  ownerEnded,
  type ProcessRecord,
  processesOf,
  recordProcessesIn,
  runningRecords,
  signalProcesses,
  stopRecorded,
} from "../../scripts/devnet/processRecords.ts";
import { descendantsOf, processStartTime } from "../../scripts/devnet/processTree.ts";
import { TEST_PROCESS_FOLDER } from "./testProcesses.ts";

/**
 * A global setup for every project: nothing a test run starts outlives it.
 * - At the start, it stops what earlier runs of this checkout left running (their test process
 *   was killed before it could stop them: SIGKILL, a crash, a closed terminal).
 * - On SIGINT or SIGTERM (Ctrl-C, or a signal to `npm test` or to `vitest`), it stops every
 *   process this run started before vitest exits. Anvil, Ponder and PostgreSQL run in process
 *   groups of their own, so a Ctrl-C at the terminal does not reach them by itself.
 * - At the end, it stops what a test file started and did not stop.
 */
export default async function setup() {
  recordProcessesIn(TEST_PROCESS_FOLDER);
  report("an earlier, interrupted test run left", await stopRecorded(TEST_PROCESS_FOLDER));

  const runStart = processStartTime(process.pid);
  const ofThisRun = (record: ProcessRecord) => {
    if (ownerEnded(record)) return true;
    if (record.owner.pid === process.pid && record.owner.startTime === runStart) return true;
    return descendantsOf(process.pid).includes(record.owner.pid);
  };
  const stopNow = () => {
    // A worker can still be starting a process when the signal comes (seen: two fault-suite
    // Ponders started as npm test was stopped, left running): look again until every process
    // of this run has ended and no new one has appeared for a second, within 5 s. vitest exits
    // a millisecond after the signal: wait here, synchronously.
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const signalled = new Map<string, { pid: number; startTime: string }>();
    const deadline = Date.now() + 5_000;
    let lastFound = Date.now();
    while (Date.now() < deadline) {
      const found = processesOf(runningRecords(TEST_PROCESS_FOLDER, ofThisRun)).filter(
        (p) => !signalled.has(`${p.pid}:${p.startTime}`),
      );
      if (found.length > 0) {
        signalProcesses(found, "SIGTERM");
        for (const p of found) signalled.set(`${p.pid}:${p.startTime}`, p);
        lastFound = Date.now();
      }
      const running = [...signalled.values()].some((p) => processStartTime(p.pid) === p.startTime);
      if (!running && Date.now() - lastFound >= 1_000) break;
      Atomics.wait(pause, 0, 0, 50);
    }
    signalProcesses([...signalled.values()], "SIGKILL");
  };
  process.on("SIGINT", stopNow);
  process.on("SIGTERM", stopNow);

  return async () => {
    process.off("SIGINT", stopNow);
    process.off("SIGTERM", stopNow);
    // Everything of this run, not only what ended files left: a worker that vitest could not
    // terminate (it gave up on it under load, "Timeout terminating forks worker") still counts
    // as running, and its chains and indexers would outlive the run.
    report("test files left", await stopRecorded(TEST_PROCESS_FOLDER, { select: ofThisRun }));
  };
}

function report(what: string, records: ProcessRecord[]): void {
  if (records.length === 0) return;
  const names = records.map((record) => `${record.name} (pid ${record.pid})`).join(", ");
  console.warn(`Stopped ${records.length} process(es) ${what} running: ${names}`);
}
