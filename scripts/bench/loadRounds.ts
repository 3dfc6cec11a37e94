import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
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
