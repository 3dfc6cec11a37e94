import { join } from "node:path";

/**
 * Where a test run records the processes it starts (scripts/devnet/processRecords.ts): a folder
 * of this checkout's own, so that runs in other checkouts on the same machine are never touched.
 * TEST_PROCESS_FOLDER moves it (test/integration/testProcesses.test.ts runs vitest in vitest).
 */
export const TEST_PROCESS_FOLDER =
  process.env.TEST_PROCESS_FOLDER ?? join(import.meta.dirname, "..", "..", ".test-processes");
