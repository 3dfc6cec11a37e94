import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

/**
 * `npm test`: the unit and integration projects, then the short fault suite on its own (it
 * starts several stacks of its own; beside the other tests it starves their time-outs on two
 * cores). A Node process rather than `vitest … && vitest …` in the shell: npm passes SIGINT
 * and SIGTERM to its script's shell, and sh dies of them without passing them on, so vitest
 * went on running with its chains and indexers. Here each signal reaches the running vitest,
 * which stops everything it started (test/support/stopTestProcesses.ts), and no later step runs.
 */

const vitest = join(import.meta.dirname, "..", "..", "node_modules", "vitest", "vitest.mjs");
const steps = [
  ["run", "--project", "unit", "--project", "integration"],
  ["run", "--project", "faults"],
];

let running: ChildProcess | undefined;
let stoppedBy: NodeJS.Signals | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    stoppedBy = signal;
    running?.kill(signal);
  });
}

for (const args of steps) {
  if (stoppedBy) break;
  running = spawn(process.execPath, [vitest, ...args], { stdio: "inherit" });
  const code = await new Promise<number>((resolve) => {
    running?.once("exit", (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)));
  });
  running = undefined;
  if (code !== 0) process.exit(code);
}
process.exit(stoppedBy === "SIGINT" ? 130 : stoppedBy === "SIGTERM" ? 143 : 0);
