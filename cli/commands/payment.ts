import type { Command } from "commander";
import { txHashInput } from "../../api/schemas/inputs.ts";
import { paymentExplanationResponse } from "../../api/schemas/responses.ts";
import { createOutput } from "../output.ts";
import { ServiceClient, serviceUrl } from "../serviceClient.ts";
import { checkedOption, type GlobalOptions } from "./options.ts";

export function registerPayment(program: Command): void {
  program
    .command("payment")
    .description(
      "what happened to my payment? Each transfer to pay_to in a transaction: the claim it paid, or why none",
    )
    .argument("<tx_hash>", "the transaction that paid (0x and 64 hex digits)")
    .addHelpText(
      "after",
      `
Example:
  pay-and-earn payment 0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060`,
    )
    .action(async (hash: string, _options: unknown, command: Command) => {
      const global = command.optsWithGlobals<GlobalOptions>();
      const output = createOutput(global);
      const txHash = checkedOption("<tx_hash>", txHashInput, hash);
      const service = new ServiceClient(serviceUrl(global.service));
      const explanation = await service.get(`/api/payments/${txHash}`, paymentExplanationResponse);
      output.result(explanation);
      output.line(explanation.summary);
      for (const transfer of explanation.transfers) {
        output.line();
        output.fields([
          [
            "Transfer",
            `#${transfer.log_index}: ${transfer.amount_usdc} USDC from ${transfer.from}`,
          ],
          [
            "Block",
            `${transfer.block_number}${transfer.confirmations !== null ? ` (${transfer.confirmations} confirmations)` : ""}`,
          ],
          ["State", transfer.state],
          ["Claim", transfer.claim_id ? `${transfer.claim_id} (${transfer.claim_status})` : null],
          ["Reason", transfer.reason],
          ["Explanation", transfer.explanation],
        ]);
      }
    });
}
