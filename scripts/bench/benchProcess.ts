import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../test/support/ports.ts";
import { waitForExit } from "../devnet/processes.ts";

const repositoryRoot = join(import.meta.dirname, "..", "..");

export interface BenchProcess {
  url: string;
  pid: number;
  /** Resident memory now, from /proc (Linux), in MiB. */
  rssMiB(): Promise<number>;
  /** CPU time the process has used so far (user and system), in seconds. */
  cpuSeconds(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A Node process under load (the service as `node api/main.ts`, or the bare Express baseline),
 * on a core of its own rather than sharing the benchmark's event loop. It must print one line
 * `listening <url>` (bareServer.ts) or answer GET /api/health (the service) once ready.
 */
export async function startBenchProcess(options: {
  script: string;
  env: Record<string, string>;
  nodeArgs?: string[];
  /** Path whose answer means "ready"; without it, the process prints `listening <url>`. */
  readyPath?: string;
  port?: number;
  /** Every line the process writes (stdout and stderr), appended here. */
  logFile?: string;
  /** The checkout `script` is taken from (bench:ab's other build); this one by default. */
  root?: string;
}): Promise<BenchProcess> {
  const root = options.root ?? repositoryRoot;
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), join(root, options.script)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Never left running by a benchmark that dies: it holds a port and a database.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-10_000);
  };
  child.stderr?.on("data", collect);
  if (options.logFile) {
    const log = createWriteStream(options.logFile, { flags: "a" });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
  }
  const url = await new Promise<string>((resolve, reject) => {
    const failed = () => reject(new Error(`${options.script} exited during start-up:\n${output}`));
    child.once("exit", failed);
    const ready = (found: string) => {
      child.off("exit", failed);
      resolve(found);
    };
    if (options.readyPath) {
      child.stdout?.on("data", collect);
      const base = `http://127.0.0.1:${options.port}`;
      const poll = async () => {
        const answered = await fetch(`${base}${options.readyPath}`).then(
          () => true,
          () => false,
        );
        if (answered) ready(base);
        else if (child.exitCode === null) setTimeout(poll, 100);
      };
      void poll();
    } else {
      child.stdout?.on("data", (chunk: Buffer) => {
        collect(chunk);
        const match = /listening (\S+)/.exec(output);
        if (match?.[1]) ready(match[1]);
      });
    }
  });
  const pid = child.pid as number;
  return {
    url,
    pid,
    async rssMiB() {
      const status = await readFile(`/proc/${pid}/status`, "utf8");
      const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
      return kib / 1024;
    },
    cpuSeconds: async () => (await processStat(pid)).cpuSeconds,
    stop: () => waitForExit(child, "SIGTERM"),
  };
}

/** Samples a process's resident memory every 200 ms until stopped; returns the peak. */
export function samplePeakRss(target: BenchProcess) {
  let peak = 0;
  const timer = setInterval(() => {
    target.rssMiB().then(
      (value) => {
        peak = Math.max(peak, value);
      },
      () => {},
    );
  }, 200);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

/**
 * The service as `node api/main.ts` on a free port, for the payout benchmarks:
 * BENCH_CPU_PROF=<dir> runs it under `node --cpu-prof` (summarizeProfile.ts reads the file),
 * BENCH_SERVICE_LOG=<file> keeps its log lines, at BENCH_LOG_LEVEL (the bench's level otherwise).
 */
export async function startServiceProcess(env: Record<string, string>): Promise<BenchProcess> {
  const port = await freePort();
  return startBenchProcess({
    script: "api/main.ts",
    env: {
      ...env,
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      ...(process.env.BENCH_LOG_LEVEL ? { LOG_LEVEL: process.env.BENCH_LOG_LEVEL } : {}),
    },
    nodeArgs: process.env.BENCH_CPU_PROF
      ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
      : [],
    ...(process.env.BENCH_SERVICE_LOG ? { logFile: process.env.BENCH_SERVICE_LOG } : {}),
    readyPath: "/api/health",
    port,
  });
}

/**
 * /proc/<pid>/stat: the parent (field 4), the CPU time used, utime and stime (fields 14 and 15,
 * in clock ticks, 100 a second), and that of its children that ended and were waited for,
 * cutime and cstime (16 and 17); the command name (field 2) may hold spaces, so fields are
 * counted from its closing parenthesis.
 */
async function processStat(
  pid: number,
): Promise<{ parent: number; cpuSeconds: number; endedChildrenCpuSeconds: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = (index: number) => Number(fields[index]) / 100;
  return {
    parent: Number(fields[1]),
    cpuSeconds: ticks(11) + ticks(12),
    endedChildrenCpuSeconds: ticks(13) + ticks(14),
  };
}

/**
 * CPU time used so far by `pid` and its children (a PostgreSQL server and its backends), in
 * seconds, those that ended included (a backend that exits is waited for by its server, which
 * then counts its time).
 */
export async function processTreeCpuSeconds(pid: number): Promise<number> {
  const root = await processStat(pid);
  let total = root.cpuSeconds + root.endedChildrenCpuSeconds;
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === pid) continue;
    const stat = await processStat(Number(entry)).catch(() => null);
    if (stat?.parent === pid) total += stat.cpuSeconds;
  }
  return total;
}
