import { execFile } from "node:child_process";
import { join } from "node:path";
import { recordProcess } from "../../scripts/devnet/processRecords.ts";
import { childEnvironment } from "./childEnvironment.ts";

const repositoryRoot = join(import.meta.dirname, "..", "..");
const bin = join(repositoryRoot, "cli", "bin.js");

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `pay-and-earn …` as a user runs it: the bin in a child process of its own, with only the
 * environment given (plus PATH and HOME), stdout and stderr piped.
 */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  options: { timeoutMs?: number; onStdout?: (printedSoFar: string) => void } = {},
): Promise<CliRun> {
  return run(process.execPath, [bin, ...args], env, options.timeoutMs, args, options.onStdout);
}

/**
 * The same in a pseudo-terminal (util-linux `script`), so stdout is a TTY: what a person at a
 * terminal sees, escape codes included. `script` merges stdout and stderr into `stdout`.
 */
export function runCliInTerminal(
  args: string[],
  env: Record<string, string> = {},
  options: { timeoutMs?: number } = {},
): Promise<CliRun> {
  const quoted = [process.execPath, bin, ...args].map((part) => `'${part.replace(/'/g, "'\\''")}'`);
  // A pseudo-terminal starts with no size; a person's terminal has one.
  const command = `stty cols 120 rows 40; ${quoted.join(" ")}`;
  return run(
    "script",
    ["-qec", command, "/dev/null"],
    { TERM: "xterm-256color", ...env },
    options.timeoutMs,
    args,
  );
}

function run(
  file: string,
  argv: string[],
  env: Record<string, string>,
  // A CLI process's start alone took over 30 s in a whole run on a slow, loaded 2-core VM
  // (BENCHMARKS.md#test-suite); the test's own timeout is the backstop.
  timeoutMs = 120_000,
  shownArgs: string[],
  onStdout?: (printedSoFar: string) => void,
): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = execFile(
      file,
      argv,
      {
        cwd: repositoryRoot,
        env: { ...childEnvironment(), ...env },
        timeout: timeoutMs,
        maxBuffer: 10 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        // CLI_TEST_OUTPUT=1 shows what each run printed, as a person would have seen it.
        if (process.env.CLI_TEST_OUTPUT) {
          process.stderr.write(
            `\n$ pay-and-earn ${shownArgs.join(" ")}   (exit ${code})\n${stdout}${stderr}`,
          );
        }
        resolve({ code, stdout, stderr });
      },
    );
    recordProcess(child, "cli");
    // What it has printed so far, as it prints it: a test can act once a line is out.
    let printed = "";
    child.stdout?.on("data", (chunk: Buffer | string) => {
      printed += chunk.toString();
      onStdout?.(printed);
    });
  });
}
