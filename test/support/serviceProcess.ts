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
  /**
   * Until a `ROLE=worker` (or `all`) process logs `workers running`: every worker loop had its
   * first tick (docs/operating.md#worker-replicas). Fails at once, with what the process
   * wrote, if it exits first, and at once if its LOG_LEVEL hides the line. Bounded like
   * `answering`.
   */
  workersRunning(timeoutMs?: number): Promise<void>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL (no shutdown of any kind, like a power cut), then waits for the exit. */
  kill(): Promise<void>;
}

/**
 * The LOG_LEVEL a process waited on with `workersRunning` needs: info, or debug when
 * SERVICE_TEST_LOGS asks for everything.
 */
export const ANNOUNCING_LOG_LEVEL = process.env.SERVICE_TEST_LOGS ? "debug" : "info";

/** Levels at which the service writes its `info` lines (pino's names). */
const LEVELS_THAT_LOG_INFO = new Set(["trace", "debug", "info"]);

/** The service's line once every worker loop had its first tick (api/service.ts). */
function announcesWorkers(line: string): boolean {
  try {
    return (JSON.parse(line) as { msg?: unknown }).msg === "workers running";
  } catch {
    return false;
  }
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
  // The log's lines (stdout), read for the one that says the workers run.
  let workersAnnounced = () => {};
  const workersAnnouncement = new Promise<void>((resolve) => {
    workersAnnounced = resolve;
  });
  let partialLine = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    collect(chunk);
    const lines = (partialLine + chunk.toString("utf8")).split("\n");
    partialLine = lines.pop() ?? "";
    if (lines.some(announcesWorkers)) workersAnnounced();
  });
  child.stderr?.on("data", collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });

  /** `ready`, unless the process exits first or `timeoutMs` passes: then fails with its output. */
  async function readyOrExited(ready: Promise<void>, what: string, timeoutMs: number) {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const readyInTime = new Promise<void>((resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`Timed out after ${timeoutMs} ms waiting for ${what}: ${output}`)),
        timeoutMs,
      );
      ready.then(resolve, reject);
    }).finally(() => {
      settled = true;
      clearTimeout(timer);
    });
    const exitedFirst = exited.then((how) => {
      if (!settled)
        throw new Error(`${what}: the process exited (${JSON.stringify(how)}): ${output}`);
    });
    // Whichever loses settles later with nobody waiting: its outcome is already told.
    readyInTime.catch(() => {});
    exitedFirst.catch(() => {});
    await Promise.race([readyInTime, exitedFirst]);
  }

  return {
    exited,
    answering(url, timeoutMs = 90_000) {
      const listening = waitFor(
        () => fetch(url, { signal: AbortSignal.timeout(5_000) }).then(() => true),
        { timeoutMs, what: `the service at ${url}` },
      ).then(() => {});
      return readyOrExited(listening, `the service at ${url}`, timeoutMs);
    },
    async workersRunning(timeoutMs = 90_000) {
      if (!LEVELS_THAT_LOG_INFO.has(env.LOG_LEVEL ?? "info"))
        throw new Error(`workersRunning needs LOG_LEVEL info or debug, not ${env.LOG_LEVEL}`);
      await readyOrExited(workersAnnouncement, "the service's workers to run", timeoutMs);
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
