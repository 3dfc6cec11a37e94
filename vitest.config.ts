import { enableCompileCache } from "node:module";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";
import { COMPILE_CACHE_DIRECTORY } from "./test/support/childEnvironment.ts";
import { FAILURE_RECORD_FOLDER_VARIABLE } from "./test/support/failureRecords.ts";

// Node keeps the compiled code of what it loads, here and in every worker and process the
// tests start (they inherit the setting): most of a Ponder or CLI start was compiling the same
// modules again (docs/testing.md#speed).
process.env.NODE_COMPILE_CACHE ??= COMPILE_CACHE_DIRECTORY;
enableCompileCache(process.env.NODE_COMPILE_CACHE);

// This run's own folder for the failure records its workers write (test/support/failureRecords.ts).
process.env[FAILURE_RECORD_FOLDER_VARIABLE] = join(
  import.meta.dirname,
  "node_modules",
  ".cache",
  "pay-and-earn",
  "failures",
  String(process.pid),
);

/**
 * The x402 SDK starts its check that the asset is a contract (eth_getCode) before it knows
 * whether it will wait for it; when verification stops earlier (the payer's own read failed),
 * that promise rejects with nobody listening. The service logs such rejections and goes on
 * (api/main.ts); tests run the service in their own process, where vitest would count it as a
 * failure of whichever test ran last. Only this SDK rejection is let through (docs/traps.md).
 */
const SDK_DANGLING_ASSET_CHECK = /^failed to check whether asset is a contract:/;

/**
 * Every project records the processes its files start and stops them when the run is
 * interrupted or ends, and what an earlier, killed run left (test/support/stopTestProcesses.ts).
 */
const NOTHING_LEFT_RUNNING = {
  globalSetup: ["test/support/stopTestProcesses.ts"],
  setupFiles: ["test/support/recordTestProcesses.ts", "test/support/recordFailures.ts"],
};

export default defineConfig({
  test: {
    // vitest's default is one file fewer than the cores: one at a time on a 2-core machine, where
    // the integration files mostly wait on their chain, database and indexer. Two at a time took
    // `npm test`'s unit and integration part from 904 s to 635 s on such a machine, and three
    // from 611 s to 524 s on a slower one, whose cores the run kept busy throughout
    // (docs/traps.md#vitest).
    maxWorkers: availableParallelism() + 1,
    onUnhandledError: (error) => !SDK_DANGLING_ASSET_CHECK.test(error.message ?? ""),
    reporters: [
      "default",
      "./test/support/failedTestsReporter.ts",
      "./test/support/slowestFilesReporter.ts",
    ],
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          // Most of a unit file's time was importing (viem, zod, the API's modules) again in a
          // fresh module graph: sharing one per worker took the project from 123 s to 65 s at
          // load 11-13 (BENCHMARKS.md#test-suite). Unit files keep no state between them.
          isolate: false,
          ...NOTHING_LEFT_RUNNING,
          // vitest's 5 s: at load 12 (a whole run beside other work) a property test and the
          // log-line tests, which start a process, took 5-15 s. Speed is for the benchmarks.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "integration",
          // test/attacks: each known attack on the money, as a scenario (its README.md).
          include: ["test/integration/**/*.test.ts", "test/attacks/**/*.test.ts"],
          // One module graph (and process) per worker, as the unit project has: a fresh one per
          // file spent ~6 CPU s importing the API and the SDKs again for each of ~80 files. A file
          // leaves nothing running behind it (each worker's open handles were counted at every
          // file's start: the same few throughout a whole run), and a crash file's service
          // processes are processes of their own (BENCHMARKS.md#test-suite).
          isolate: false,
          ...NOTHING_LEFT_RUNNING,
          globalSetup: [...NOTHING_LEFT_RUNNING.globalSetup, "test/support/globalSetup.ts"],
          // A backstop for a hang, not a speed check: tests that start or crash processes took
          // 30-55 s alone in a whole run on a slow, loaded 2-core VM, and past 60 s there once
          // (BENCHMARKS.md#test-suite). Waits inside a test time out first and name themselves.
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          // The fault suite (RELIABILITY.md): its own chain, PostgreSQL and Ponder per variant;
          // FAULTS=long for the long form.
          name: "faults",
          include: ["test/faults/**/*.test.ts"],
          ...NOTHING_LEFT_RUNNING,
          // The run's own test sets its timeout (test/support/faults/faultSuite.ts).
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
