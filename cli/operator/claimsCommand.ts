import { type Command, Option } from "commander";
import { z } from "zod";
import { type ClaimNeedingLook, readClaimsByStatus } from "../../api/health/attentionLists.ts";
import { CLAIM_FAILURE_REASONS } from "../../api/reasons/reasonCatalog.ts";
import { checkedOption, type GlobalOptions } from "../commands/options.ts";
import { createOutput } from "../output.ts";

const sinceInput = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], {
    message: "must be an ISO 8601 date-time (2025-01-31T12:00:00Z) or date (2025-01-31)",
  })
  .transform((text) => new Date(text));
const limitInput = z.coerce
  .number({ message: "is not a number" })
  .int()
  .min(1, { message: "must be at least 1" })
  .max(1000, { message: "must be at most 1000" });

export function registerClaims(program: Command): void {
  program
    .command("claims")
    .description(
      "operator: claims that failed or are still paying, with the reason (reads the service's configuration)",
    )
    .addOption(
      new Option("--status <status>", "which claims")
        .choices(["failed", "paying", "paid"])
        .makeOptionMandatory(),
    )
    .option("--since <time>", "created at or after (ISO date or date-time; default: 7 days ago)")
    .option("--limit <n>", "at most this many, newest first", "100")
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn claims --status failed --since 2026-11-01
  pay-and-earn claims --status paying --json`,
    )
    .action(
      async (options: { status: string; since?: string; limit: string }, command: Command) => {
        const output = createOutput(command.optsWithGlobals<GlobalOptions>());
        const since = options.since
          ? checkedOption("--since", sinceInput, options.since)
          : new Date(Date.now() - 7 * 24 * 3600 * 1000);
        const limit = checkedOption("--limit", limitInput, options.limit);
        const { connect, requireServiceConfig } = await import("./operatorContext.ts");
        const config = requireServiceConfig();
        const connections = connect(config);
        try {
          const claims = await readClaimsByStatus(connections.sql, options.status, since, limit);
          const rows = claims.map((claim) => ({ ...claim, reason: reasonFor(claim) }));
          output.result({ status: options.status, since: since.toISOString(), claims: rows });
          if (rows.length === 0)
            output.line(`No ${options.status} claims since ${since.toISOString()}.`);
          for (const row of rows) {
            output.line(
              `${row.claim_id}  ${row.status}  ${row.flow}  ${row.created_at.toISOString()}  ${row.payout_address}`,
            );
            output.line(`  ${row.reason}`);
          }
        } finally {
          await connections.close();
        }
      },
    );
}

function reasonFor(claim: ClaimNeedingLook): string {
  if (claim.status === "failed") {
    const words = CLAIM_FAILURE_REASONS[claim.failure_reason as keyof typeof CLAIM_FAILURE_REASONS];
    return `${claim.failure_reason ?? "unknown"}: ${words ?? "no reason recorded"}${claim.payout_tx ? ` (payout ${claim.payout_tx}${claim.revert_reason ? `, ${claim.revert_reason}` : ""})` : ""}`;
  }
  if (claim.payout_tx) {
    return `payout ${claim.payout_tx} is ${claim.payout_status}${claim.revert_reason ? ` (${claim.revert_reason})` : ""}${claim.last_error ? `; last error: ${claim.last_error}` : ""}`;
  }
  return "paid, no payout signed yet: the payout wallet may be short (pay-and-earn doctor)";
}
