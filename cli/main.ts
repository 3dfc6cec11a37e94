import { CommanderError } from "commander";
import { CliError } from "./errors.ts";
import { buildProgram } from "./program.ts";
import { terminalSafe } from "./terminalText.ts";

/**
 * The CLI's process: runs one command; a failure is one line on stderr and a non-zero exit
 * (2: the command line or the environment is wrong; 1: what was asked for failed), never a
 * stack trace (PAY_AND_EARN_DEBUG=1 shows one).
 */
const program = buildProgram();
try {
  await program.parseAsync(process.argv);
} catch (error) {
  process.exitCode = exitCodeFor(error);
}

function exitCodeFor(error: unknown): number {
  if (error instanceof CommanderError) {
    // Commander has printed its own line (or the help); --help and --version exit 0.
    return error.exitCode === 0 ? 0 : 2;
  }
  if (error instanceof CliError) {
    process.stderr.write(`pay-and-earn: ${terminalSafe(error.message, { oneLine: true })}\n`);
    return error.exitCode;
  }
  const message = error instanceof Error ? error.message.split("\n")[0] : String(error);
  process.stderr.write(
    `pay-and-earn: unexpected error: ${terminalSafe(message ?? "", { oneLine: true })}\n`,
  );
  if (process.env.PAY_AND_EARN_DEBUG) console.error(error);
  return 1;
}
