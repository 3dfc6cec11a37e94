import type { ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { commandOf, descendantsOf, processStartTime } from "./processTree.ts";

/**
 * Pid files for the processes that a launcher (`npm start`) or a test run starts, in a folder
 * of the checkout's own, so that a later run finds and stops what a killed one left behind.
 * A record names the process and its starter (the "owner"), each by pid and start time: a
 * process is left over when its owner has ended and it has not; a reused pid never matches.
 * Only records in this checkout's folder are ever acted on, so other checkouts' processes on
 * the same machine are never touched. See docs/testing.md#nothing-left-running.
 */

export interface ProcessRecord {
  pid: number;
  startTime: string;
  name: string;
  command: string;
  owner: { pid: number; startTime: string };
}

let recordFolder: string | undefined;

/** From now on, this process records what it starts in `folder` (until the process ends). */
export function recordProcessesIn(folder: string): void {
  mkdirSync(folder, { recursive: true });
  recordFolder = folder;
}

/** Records `child` (a no-op unless recordProcessesIn was called); the record goes at its exit. */
export function recordProcess(child: ChildProcess, name: string): void {
  const folder = recordFolder;
  const pid = child.pid;
  if (!folder || pid === undefined) return;
  const startTime = processStartTime(pid);
  const ownerStart = processStartTime(process.pid);
  if (!startTime || !ownerStart) return;
  const file = join(folder, `${pid}.json`);
  const record: ProcessRecord = {
    pid,
    startTime,
    name,
    command: commandOf(pid).slice(0, 500),
    owner: { pid: process.pid, startTime: ownerStart },
  };
  writeFileSync(file, `${JSON.stringify(record)}\n`);
  child.once("exit", () => rmSync(file, { force: true }));
}

export function readRecords(folder: string): ProcessRecord[] {
  let names: string[];
  try {
    names = readdirSync(folder).filter((name) => name.endsWith(".json"));
  } catch {
    return [];
  }
  const records: ProcessRecord[] = [];
  for (const name of names) {
    try {
      records.push(JSON.parse(readFileSync(join(folder, name), "utf8")) as ProcessRecord);
    } catch {
      // Half-written by a starter killed mid-write, or removed meanwhile: nothing to act on.
      rmSync(join(folder, name), { force: true });
    }
  }
  return records;
}

const isAlive = (pid: number, startTime: string) => processStartTime(pid) === startTime;

/** A record whose starter has ended: left over, unless its starter stopped it. */
export const ownerEnded = (record: ProcessRecord) =>
  !isAlive(record.owner.pid, record.owner.startTime);

/**
 * Records of processes still running whose owner has ended (`ownerEnded`, by default), or
 * that `select` picks; records of processes that have ended are removed on the way.
 */
export function runningRecords(
  folder: string,
  select: (record: ProcessRecord) => boolean = ownerEnded,
): ProcessRecord[] {
  const running: ProcessRecord[] = [];
  for (const record of readRecords(folder)) {
    if (!isAlive(record.pid, record.startTime)) {
      rmSync(join(folder, `${record.pid}.json`), { force: true });
    } else if (select(record)) {
      running.push(record);
    }
  }
  return running;
}

/** Each record's process and everything below it, by pid and start time, while they run. */
export function processesOf(records: ProcessRecord[]): { pid: number; startTime: string }[] {
  const found: { pid: number; startTime: string }[] = [];
  for (const record of records) {
    if (!isAlive(record.pid, record.startTime)) continue;
    found.push({ pid: record.pid, startTime: record.startTime });
    for (const pid of descendantsOf(record.pid)) {
      const startTime = processStartTime(pid);
      if (startTime) found.push({ pid, startTime });
    }
  }
  return found;
}

/** Sends `signal` to those of `processes` that still run (no waiting). */
export function signalProcesses(
  processes: { pid: number; startTime: string }[],
  signal: NodeJS.Signals,
): void {
  for (const { pid, startTime } of processes) {
    if (!isAlive(pid, startTime)) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // Ended meanwhile.
    }
  }
}

/**
 * Stops the recorded processes that `select` picks (by default those whose owner has ended,
 * left by a run before this one): SIGTERM to each and everything below it, SIGKILL after
 * `graceMs` to what still runs. Returns the records it acted on.
 */
export async function stopRecorded(
  folder: string,
  options: { graceMs?: number; select?: (record: ProcessRecord) => boolean } = {},
): Promise<ProcessRecord[]> {
  const found = runningRecords(folder, options.select);
  if (found.length === 0) return [];
  const processes = processesOf(found);
  signalProcesses(processes, "SIGTERM");
  const deadline = Date.now() + (options.graceMs ?? 5_000);
  while (Date.now() < deadline && processes.some((p) => isAlive(p.pid, p.startTime))) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  signalProcesses(processes, "SIGKILL");
  for (const record of found) rmSync(join(folder, `${record.pid}.json`), { force: true });
  return found;
}
