import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import type { BenchProcess } from "./benchProcess.ts";
import type { LoadResult, LoadSpec } from "./loadRunner.ts";

/** One autocannon run (loadRunner.ts) in a process of its own; resolves with its result. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(import.meta.dirname, "loadRunner.ts"), JSON.stringify(spec)],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as LoadResult;
}

/** Requests whose status is not the one the route is expected to answer. */
export function unexpectedStatuses(result: LoadResult, expected: number): number {
  return Object.entries(result.statuses)
    .filter(([status]) => Number(status) !== expected)
    .reduce((sum, [, count]) => sum + count, 0);
}

/** One alternation: the route at saturation, against the bare runs on either side. */
export interface Round {
  saturated: LoadResult & { cpuMicros: number };
  bareRps: number;
  bareCpuMicros: number;
  /** PostgreSQL's CPU over the route's run, per request of it (µs), null on DATABASE_URL's. */
  databaseCpuMicros: number | null;
  share: number;
}

/**
 * A route at saturation alternated with bare Express over `rounds` rounds, bare first and last
 * (bare, route, bare, …, route, bare): a round's share is its route run's req/s over the mean of
 * the bare runs on either side, so what else takes the cores meanwhile moves both. Answers every
 * round in the order they ran and the one with the median share.
 */
export async function alternateWithBare(options: {
  rounds: number;
  service: BenchProcess;
  route: () => Promise<LoadResult>;
  bare: BenchProcess;
  bareRoute: () => Promise<LoadResult>;
  /** The embedded PostgreSQL's CPU seconds so far; null on DATABASE_URL's server. */
  databaseCpuSeconds: (() => Promise<number>) | null;
}): Promise<{ rounds: Round[]; median: Round }> {
  const { service, bare, databaseCpuSeconds } = options;
  const rounds: Round[] = [];
  let bareBefore = await withCpu(bare, options.bareRoute());
  for (let round = 0; round < options.rounds; round += 1) {
    const databaseBefore = databaseCpuSeconds ? await databaseCpuSeconds() : 0;
    const saturated = await withCpu(service, options.route());
    const databaseUsed = databaseCpuSeconds ? (await databaseCpuSeconds()) - databaseBefore : null;
    const bareAfter = await withCpu(bare, options.bareRoute());
    const bareRps = (bareBefore.rps + bareAfter.rps) / 2;
    rounds.push({
      saturated,
      bareRps,
      bareCpuMicros: (bareBefore.cpuMicros + bareAfter.cpuMicros) / 2,
      databaseCpuMicros:
        databaseUsed === null ? null : (databaseUsed * 1e6) / Math.max(1, saturated.requests),
      share: saturated.rps / bareRps,
    });
    bareBefore = bareAfter;
  }
  const median = [...rounds].sort((a, b) => a.share - b.share)[Math.floor((rounds.length - 1) / 2)];
  if (!median) throw new Error("no rounds");
  return { rounds, median };
}

/**
 * A load run with the CPU time `target` spent per request during it (µs): unlike req/s, it
 * hardly moves when other processes share the cores, so it tells a change from the noise.
 */
async function withCpu(
  target: BenchProcess,
  run: Promise<LoadResult>,
): Promise<LoadResult & { cpuMicros: number }> {
  const before = await target.cpuSeconds();
  const result = await run;
  const used = (await target.cpuSeconds()) - before;
  return { ...result, cpuMicros: (used * 1e6) / Math.max(1, result.requests) };
}
