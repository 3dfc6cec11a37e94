import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { claimIdInput } from "../../api/schemas/inputs.ts";
import { receiptResponse } from "../../api/schemas/responses.ts";
import { CliError, reasonOfError } from "../errors.ts";
import { createOutput } from "../output.ts";
import { ServiceClient, serviceUrl } from "../serviceClient.ts";
import { checkedOption, type GlobalOptions } from "./options.ts";

export function registerReceipt(program: Command): void {
  program
    .command("receipt")
    .description("the signed receipt of a completed claim (receipt.json)")
    .argument("<claim_id>", "the claim (clm_…)")
    .option("--out <file>", "write receipt.json to this file")
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn receipt clm_3mJq0cX9yWq1bKQ8vYbJ2w --out receipt.json
  pay-and-earn verify receipt.json`,
    )
    .action(async (id: string, options: { out?: string }, command: Command) => {
      const global = command.optsWithGlobals<GlobalOptions>();
      const output = createOutput(global);
      const claimId = checkedOption("<claim_id>", claimIdInput, id);
      const service = new ServiceClient(serviceUrl(global.service));
      const receipt = await service.get(`/api/claims/${claimId}/receipt`, receiptResponse);
      if (options.out) {
        try {
          await writeFile(options.out, `${JSON.stringify(receipt, null, 2)}\n`);
        } catch (error) {
          throw new CliError(
            "write_failed",
            `write_failed: ${options.out}: ${reasonOfError(error)}`,
          );
        }
      }
      output.result(receipt);
      if (options.out) {
        output.line(
          `Saved the receipt of ${claimId} to ${options.out}; check it with: pay-and-earn verify ${options.out}`,
        );
        return;
      }
      output.line(receipt.message);
      output.line();
      output.fields([
        ["Signature", receipt.signature],
        ["Signer", receipt.signer],
        ["Verify", receipt.verify_url],
      ]);
    });
}
