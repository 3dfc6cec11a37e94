import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";

/**
 * Each worker writes the errors of the tests that fail in it to a file of its own, beside what it
 * reports to vitest: with one module graph per worker (`isolate: false`), whole runs counted
 * failed tests whose errors never reached vitest's report (docs/traps.md#vitest). The run's
 * reporter (failedTestsReporter.ts) prints them from here when that happens. The folder is the
 * run's own (its main process sets it), so that two vitest runs side by side keep theirs apart.
 */
export const FAILURE_RECORD_FOLDER_VARIABLE = "TEST_FAILURE_RECORD_FOLDER";

export type FailureRecord = { testId: string; file: string; name: string; errors: string[] };

export function recordFailure(record: FailureRecord): void {
  const folder = process.env[FAILURE_RECORD_FOLDER_VARIABLE];
  if (!folder) return;
  mkdirSync(folder, { recursive: true });
  appendFileSync(join(folder, `${process.pid}.jsonl`), `${JSON.stringify(record)}\n`);
}

/** Every record the run's workers wrote, by test id; the folder is removed. */
export function takeFailureRecords(folder: string): Map<string, FailureRecord> {
  const records = new Map<string, FailureRecord>();
  let files: string[] = [];
  try {
    files = readdirSync(folder);
  } catch {
    return records;
  }
  for (const file of files) {
    for (const line of readFileSync(join(folder, file), "utf8").split("\n")) {
      if (!line) continue;
      const record = JSON.parse(line) as FailureRecord;
      records.set(record.testId, record);
    }
  }
  rmSync(folder, { recursive: true, force: true });
  return records;
}
