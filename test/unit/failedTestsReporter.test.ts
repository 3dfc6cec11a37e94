import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { TestModule } from "vitest/node";
import FailedTestsReporter from "../support/failedTestsReporter.ts";
import { FAILURE_RECORD_FOLDER_VARIABLE, recordFailure } from "../support/failureRecords.ts";

/** A test module as the reporter reads it: its path and its failed tests. */
function moduleWith(tests: Array<{ id: string; fullName: string; errors: unknown[] }>) {
  return {
    moduleId: join(process.cwd(), "test", "integration", "example.test.ts"),
    children: {
      *allTests(state?: string) {
        if (state !== "failed") return;
        for (const test of tests) yield { ...test, result: () => ({ errors: test.errors }) };
      },
    },
  } as unknown as TestModule;
}

describe("the failed-tests reporter", () => {
  const previousFolder = process.env[FAILURE_RECORD_FOLDER_VARIABLE];
  afterEach(() => {
    process.env[FAILURE_RECORD_FOLDER_VARIABLE] = previousFolder;
    vi.restoreAllMocks();
  });

  it("prints what a worker recorded for a failed test that vitest reported without errors, and only for it", async () => {
    const folder = join(await mkdtemp(join(tmpdir(), "failures-")), "run");
    process.env[FAILURE_RECORD_FOLDER_VARIABLE] = folder;
    recordFailure({ testId: "lost", file: "x", name: "lost", errors: ["Error: the lost detail"] });
    recordFailure({ testId: "kept", file: "x", name: "kept", errors: ["Error: reported already"] });
    const written: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });

    new FailedTestsReporter().onTestRunEnd([
      moduleWith([
        { id: "lost", fullName: "a suite > the lost test", errors: [] },
        { id: "kept", fullName: "a suite > the reported test", errors: [{ message: "x" }] },
        { id: "unrecorded", fullName: "a suite > the unrecorded test", errors: [] },
      ]),
    ]);

    const output = written.join("");
    expect(output).toContain("× test/integration/example.test.ts > a suite > the lost test");
    expect(output).toContain("Error: the lost detail");
    expect(output).toContain("the unrecorded test\n(its worker recorded no error)");
    expect(output).not.toContain("reported already");
  });

  it("prints nothing when every failed test's errors were reported", async () => {
    process.env[FAILURE_RECORD_FOLDER_VARIABLE] = join(await mkdtemp(join(tmpdir(), "f-")), "r");
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    new FailedTestsReporter().onTestRunEnd([
      moduleWith([{ id: "kept", fullName: "kept", errors: [{ message: "x" }] }]),
    ]);
    expect(write).not.toHaveBeenCalled();
  });
});
