import type { Command } from "commander";
import type { GlobalOptions } from "../commands/options.ts";
import { CliError, reasonOfError } from "../errors.ts";
import { createOutput, type Output } from "../output.ts";
import type { Finding } from "./doctorFindings.ts";

export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description(
      "is this deployment healthy and funded? Reads the service's configuration (environment and .env); one ok/warn/fail line per check, with what to do; exits 1 on a fail",
    )
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn doctor
  DATABASE_URL=postgres://… RPC_URL=https://… pay-and-earn doctor --json`,
    )
    .action(async (_options: unknown, command: Command) => {
      const output = createOutput(command.optsWithGlobals<GlobalOptions>());
      const findings = await diagnose();
      const verdict = findings.some((f) => f.verdict === "fail")
        ? "fail"
        : findings.some((f) => f.verdict === "warn")
          ? "warn"
          : "ok";
      output.result({ verdict, findings });
      showFindings(output, findings);
      if (verdict === "fail") {
        const failed = findings.filter((f) => f.verdict === "fail").map((f) => f.check);
        throw new CliError("doctor_failed", `doctor_failed: ${failed.join(", ")} failed`);
      }
    });
}

async function diagnose(): Promise<Finding[]> {
  // Loaded when the doctor runs: the database client and the chain reads are not for --help.
  const [{ DOCTOR_CHECKS }, outcome, operator] = await Promise.all([
    import("./doctorChecks.ts"),
    import("./doctorFindings.ts"),
    import("./operatorContext.ts"),
  ]);
  const { connect, readServiceConfig } = operator;
  const reading = readServiceConfig();
  if (!reading.ok) {
    return reading.problems.map((problem) =>
      outcome.fail(
        "configuration",
        problem,
        "fix it in the environment or .env (.env.example documents each setting)",
      ),
    );
  }
  const { config } = reading;
  const findings: Finding[] = [
    outcome.ok(
      "configuration",
      `role ${config.role}, ${config.http.publicUrl}, chain ${config.chain.chainId}, pay_to ${config.chain.payTo}, matching variant ${config.claims.variant}`,
    ),
    ...config.warnings.map((warning) =>
      outcome.warn("configuration", warning, "see docs/configuration.md"),
    ),
  ];
  const connections = connect(config);
  try {
    for (const check of DOCTOR_CHECKS) {
      findings.push(
        ...(await check(config, connections).catch((error: unknown) => [
          outcome.fail(
            check.name,
            `could not run: ${reasonOfError(error)}`,
            "see the checks above",
          ),
        ])),
      );
    }
  } finally {
    await connections.close();
  }
  return findings;
}

function showFindings(output: Output, findings: Finding[]): void {
  const width = Math.max(...findings.map((f) => f.check.length));
  for (const finding of findings) {
    output.line(`${finding.verdict.padEnd(4)}  ${finding.check.padEnd(width)}  ${finding.detail}`);
    if (finding.action) output.line(`${" ".repeat(width + 8)}→ ${finding.action}`);
  }
}
