import type { Command } from "commander";
import { readStuckPayouts, type StuckPayout } from "../../api/health/attentionLists.ts";
import { HEALTH_REASONS } from "../../api/reasons/reasonCatalog.ts";
import { checkedOption, type GlobalOptions, seconds } from "../commands/options.ts";
import { CliError } from "../errors.ts";
import { createOutput } from "../output.ts";

export function registerPayouts(program: Command): void {
  program
    .command("payouts")
    .description(
      "operator: payouts that need a person, with the reason (reads the service's configuration)",
    )
    .option("--stuck", "payouts not mined in time, nonces taken, paid claims without a payout")
    .option(
      "--older-than <seconds>",
      "how long counts as stuck (default: HEALTH_PAYOUT_BACKLOG_SECONDS)",
    )
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn payouts --stuck
  pay-and-earn payouts --stuck --older-than 600 --json`,
    )
    .action(async (options: { stuck?: boolean; olderThan?: string }, command: Command) => {
      const output = createOutput(command.optsWithGlobals<GlobalOptions>());
      if (!options.stuck) {
        throw new CliError(
          "invalid_option",
          "invalid_option: say what to list: payouts --stuck",
          2,
        );
      }
      const { connect, requireServiceConfig } = await import("./operatorContext.ts");
      const config = requireServiceConfig();
      const olderThan =
        options.olderThan === undefined
          ? config.health.payoutBacklogSeconds
          : checkedOption("--older-than", seconds, options.olderThan);
      const connections = connect(config);
      try {
        const stuck = await readStuckPayouts(connections.sql, olderThan);
        const rows = stuck.map((row) => ({ ...row, ...reasonFor(row) }));
        output.result({ older_than_seconds: olderThan, payouts: rows });
        if (rows.length === 0) output.line(`No payout has waited more than ${olderThan} s.`);
        for (const row of rows) {
          output.line(
            `${row.claim_id}  ${row.reason}  waiting ${row.waiting_seconds} s${row.payout_tx ? `  nonce ${row.nonce}  ${row.payout_tx}` : ""}`,
          );
          output.line(`  ${row.words}`);
          output.line(`  → ${row.action}`);
        }
      } finally {
        await connections.close();
      }
    });
}

function reasonFor(row: StuckPayout): { reason: string; words: string; action: string } {
  if (row.nonce_taken) {
    return {
      reason: "payout_nonce_taken",
      words: HEALTH_REASONS.payout_nonce_taken,
      action: `check the payout wallet's nonce ${row.nonce} on the explorer, then: pay-and-earn reissue-payout ${row.claim_id}`,
    };
  }
  if (row.payout_tx) {
    return {
      reason: "payouts_unconfirmed",
      words: `${HEALTH_REASONS.payouts_unconfirmed} Broadcast ${row.broadcasts ?? 0} times${row.last_error ? `; last error: ${row.last_error}` : ""}.`,
      action:
        "the confirmer re-broadcasts and raises the fee up to PAYOUT_MAX_FEE_GWEI; check the RPC and the gas price (pay-and-earn doctor)",
    };
  }
  return {
    reason: "payouts_waiting",
    words: HEALTH_REASONS.payouts_waiting,
    action:
      "the sender signs nothing while the payout wallet is short of USDC or ETH, or while the worker is down: run pay-and-earn doctor",
  };
}
