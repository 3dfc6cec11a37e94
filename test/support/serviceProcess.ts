import { spawn } from "node:child_process";
import { join } from "node:path";
import { waitForExit } from "../../scripts/devnet/processes.ts";
import { recordProcess } from "../../scripts/devnet/processRecords.ts";
import { childEnvironment } from "./childEnvironment.ts";
import { waitFor } from "./waitFor.ts";

const repositoryRoot = join(import.meta.dirname, "..", "..");

export interface ServiceProcess {
  /** The process id (to find its connections, or to kill it). */
  pid: number;
  /** Resolves when the process ends, however it ends. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** What it wrote so far (for failure messages): the last 20,000 characters. */
  output(): string;
  /** Everything it wrote to stdout and stderr so far. */
  fullOutput(): string;
  /**
   * Until `url` answers (any HTTP status); fails at once, with what the process wrote, if it
   * exits first. A start takes ~5 s alone and took over 30 s in busy whole runs
   * (BENCHMARKS.md#test-suite): the default bound is 90 s, for failures only.
   */
  answering(url: string, timeoutMs?: number): Promise<void>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL (no shutdown of any kind, like a power cut), then waits for the exit. */
  kill(): Promise<void>;
}

/**
 * The service as the real command (`node api/main.ts`) in a child process of its own, so a
 * test can watch it die by SIGKILL and start it again. `env` is the whole environment it gets
 * (see testServiceEnv), plus PATH and HOME.
 */
export function startServiceProcess(env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, [join(repositoryRoot, "api", "main.ts")], {
    cwd: repositoryRoot,
    env: { ...childEnvironment(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  recordProcess(child, "service");
  let output = "";
  const everything: Buffer[] = [];
  const collect = (chunk: Buffer) => {
    everything.push(chunk);
    output = (output + chunk.toString("utf8")).slice(-20_000);
    if (process.env.SERVICE_TEST_LOGS) process.stderr.write(chunk);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  return {
    exited,
    async answering(url, timeoutMs = 90_000) {
      let answered = false;
      const listening = waitFor(
        () => fetch(url, { signal: AbortSignal.timeout(5_000) }).then(() => true),
        { timeoutMs, what: `the service at ${url}` },
      ).then(() => {
        answered = true;
      });
      const exitedFirst = exited.then((how) => {
        if (!answered)
          throw new Error(`the service at ${url} exited (${JSON.stringify(how)}): ${output}`);
      });
      // Whichever loses settles later with nobody waiting: its outcome is already told.
      listening.catch(() => {});
      exitedFirst.catch(() => {});
      await Promise.race([listening, exitedFirst]);
    },
    output: () => output,
    fullOutput: () => Buffer.concat(everything).toString("utf8"),
    pid: child.pid as number,
    stop: () => waitForExit(child, "SIGTERM"),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
