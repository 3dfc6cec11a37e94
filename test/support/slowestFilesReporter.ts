import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/**
 * Prints the slowest test files at the end of a run, so that a slow test is seen the day it
 * lands. A file's time is its wall-clock time in its worker: importing it (collect), its setup
 * files, and its tests and hooks. SLOWEST_FILES sets how many (default 10).
 */
export default class SlowestFilesReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const count = Number(process.env.SLOWEST_FILES ?? 10);
    const files = testModules
      .map((module) => {
        const diagnostic = module.diagnostic();
        const ms = diagnostic.collectDuration + diagnostic.setupDuration + diagnostic.duration;
        return { name: relative(process.cwd(), module.moduleId), project: module.project.name, ms };
      })
      .sort((a, b) => b.ms - a.ms)
      .slice(0, count);
    if (files.length === 0 || count <= 0) return;
    const lines = files.map(
      (file) => `  ${(file.ms / 1000).toFixed(1).padStart(7)} s  ${file.name}  (${file.project})`,
    );
    process.stdout.write(`\nSlowest test files:\n${lines.join("\n")}\n`);
  }
}
