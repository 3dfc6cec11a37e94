import type { ChildProcess } from "node:child_process";

/** Sends `signal` and resolves once the process has exited; SIGKILL after `graceMs`. */
export function waitForExit(
  child: ChildProcess,
  signal: NodeJS.Signals = "SIGTERM",
  graceMs = 15_000,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const forceKill = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.once("exit", () => {
      clearTimeout(forceKill);
      resolve();
    });
    child.kill(signal);
  });
}
