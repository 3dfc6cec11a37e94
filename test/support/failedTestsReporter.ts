import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";
import { FAILURE_RECORD_FOLDER_VARIABLE, takeFailureRecords } from "./failureRecords.ts";

/**
 * Prints the errors of failed tests whose errors did not reach vitest's own report, from what
 * their workers recorded (failureRecords.ts): vitest then counts such a test as failed and says
 * nothing more (docs/traps.md#vitest).
 */
export default class FailedTestsReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const folder = process.env[FAILURE_RECORD_FOLDER_VARIABLE];
    if (!folder) return;
    const records = takeFailureRecords(folder);
    const unreported: string[] = [];
    for (const module of testModules) {
      for (const test of module.children.allTests("failed")) {
        if (test.result().errors?.length) continue;
        const record = records.get(test.id);
        const errors = record?.errors.length ? record.errors : ["(its worker recorded no error)"];
        unreported.push(
          `× ${relative(process.cwd(), module.moduleId)} > ${test.fullName}\n${errors.join("\n\n")}`,
        );
      }
    }
    if (unreported.length === 0) return;
    process.stdout.write(
      `\nFailed tests whose errors vitest did not report (from their workers):\n\n${unreported.join("\n\n")}\n`,
    );
  }
}
