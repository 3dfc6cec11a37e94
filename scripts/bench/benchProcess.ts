import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
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
}): Promise<BenchProcess> {
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), join(repositoryRoot, options.script)],
    {
      cwd: repositoryRoot,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  // Never left running by a benchmark that dies: it holds a port and a database.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-10_000);
  };
  child.stderr?.on("data", collect);
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
    async cpuSeconds() {
      // /proc/<pid>/stat: utime and stime are fields 14 and 15, in clock ticks (100 a second);
      // the command name (field 2) may hold spaces, so count from its closing parenthesis.
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
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
