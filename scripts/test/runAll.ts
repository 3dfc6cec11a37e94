import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * `npm test`: the unit and integration projects, and beside them the short fault suite
 * (docs/testing.md#speed). The fault suite's two runs spend most of their time waiting on their
 * one-second blocks (~0.7 of a core for ~3.5 minutes); after the others they added that whole
 * time to the run. Its output is kept in a file and printed once the other run has finished, so
 * the two never interleave.
 *
 * A Node process rather than `vitest … & vitest …` in the shell: npm passes SIGINT and SIGTERM
 * to its script's shell, and sh dies of them without passing them on, so vitest went on running
 * with its chains and indexers. Here each signal reaches every running vitest, which stops
 * everything it started (test/support/stopTestProcesses.ts).
 */

const repositoryRoot = join(import.meta.dirname, "..", "..");
const vitest = join(repositoryRoot, "node_modules", "vitest", "vitest.mjs");
const outputDirectory = join(repositoryRoot, "node_modules", ".cache", "pay-and-earn");
const faultOutput = join(outputDirectory, "faults-output.txt");

const running = new Set<ChildProcess>();
let stoppedBy: NodeJS.Signals | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    stoppedBy = signal;
    for (const child of running) child.kill(signal);
  });
}

function run(args: string[], output: "inherit" | string): Promise<number> {
  const child = spawn(process.execPath, [vitest, ...args], {
    cwd: repositoryRoot,
    stdio: output === "inherit" ? "inherit" : ["ignore", "pipe", "pipe"],
  });
  if (output !== "inherit") {
    const file = createWriteStream(output);
    child.stdout?.pipe(file);
    child.stderr?.pipe(file);
  }
  running.add(child);
  return new Promise((resolve) => {
    child.once("exit", (exitCode, signal) => {
      running.delete(child);
      resolve(exitCode ?? (signal ? 1 : 0));
    });
  });
}

await mkdir(outputDirectory, { recursive: true });
const faults = run(["run", "--project", "faults"], faultOutput);
const others = await run(["run", "--project", "unit", "--project", "integration"], "inherit");
if (!stoppedBy) process.stdout.write("\nThe fault suite (it ran beside the tests above):\n");
const faultCode = await faults;
if (!stoppedBy) process.stdout.write(await readFile(faultOutput, "utf8").catch(() => ""));

const code = stoppedBy === "SIGINT" ? 130 : stoppedBy === "SIGTERM" ? 143 : others || faultCode;
process.exit(code);
