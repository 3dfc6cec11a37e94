import { beforeEach } from "vitest";
import { recordFailure } from "./failureRecords.ts";

// A setup file: every test that fails in this worker leaves its errors in the run's failure
// records (failureRecords.ts), whatever becomes of vitest's own report of them.
beforeEach((context) => {
  context.onTestFailed(({ task }) => {
    recordFailure({
      testId: task.id,
      file: task.file.filepath,
      name: task.fullTestName ?? task.name,
      errors: (task.result?.errors ?? []).map((error) =>
        [error.stack ?? `${error.name}: ${error.message}`, error.diff].filter(Boolean).join("\n"),
      ),
    });
  });
});
