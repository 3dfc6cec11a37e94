import type { Command } from "commander";
import { agentNameInput } from "../../api/schemas/inputs.ts";
import { ledgerLimitInput, ledgerResponse } from "../../api/schemas/ledger.ts";
import { createOutput } from "../output.ts";
import { ServiceClient, serviceUrl } from "../serviceClient.ts";
import { checkedOption, type GlobalOptions } from "./options.ts";

export function registerLedger(program: Command): void {
  program
    .command("ledger")
    .description("the public ledger: recent completed payouts, newest first")
    .option("--limit <n>", "entries, 1 to 100", "20")
    .option("--agent-name <name>", "only this agent name's payouts")
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn ledger --limit 5
  pay-and-earn ledger --agent-name my-agent --json`,
    )
    .action(async (options: { limit: string; agentName?: string }, command: Command) => {
      const global = command.optsWithGlobals<GlobalOptions>();
      const output = createOutput(global);
      const query = new URLSearchParams({
        limit: String(checkedOption("--limit", ledgerLimitInput, options.limit)),
      });
      if (options.agentName !== undefined) {
        query.set("agent_name", checkedOption("--agent-name", agentNameInput, options.agentName));
      }
      const service = new ServiceClient(serviceUrl(global.service));
      const ledger = await service.get(`/api/ledger?${query}`, ledgerResponse);
      output.result(ledger);
      if (ledger.entries.length === 0) {
        output.line("No completed payouts yet.");
        return;
      }
      for (const entry of ledger.entries) {
        output.line(
          [
            entry.completed_at,
            `${entry.amount_usdc} USDC`,
            entry.payout_address,
            entry.agent_name ?? "-",
            entry.flow,
            entry.payout_tx,
            entry.claim_id,
          ].join("  "),
        );
      }
      if (ledger.next_cursor) output.line(`(more: ${ledger.next_url})`);
    });
}
