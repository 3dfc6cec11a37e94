import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { addressInput, verifyReceiptRequest } from "../../api/schemas/inputs.ts";
import { pastedReceiptInput } from "../../api/schemas/pastedReceipt.ts";
import { offerResponse } from "../../api/schemas/responses.ts";
import { CliError, reasonOfError } from "../errors.ts";
import { createOutput } from "../output.ts";
import { checkReceiptOffline } from "../receiptCheck.ts";
import { ServiceClient, serviceUrl } from "../serviceClient.ts";
import { checkedOption, type GlobalOptions } from "./options.ts";

export function registerVerify(program: Command): void {
  program
    .command("verify")
    .description(
      "check a receipt offline (viem): signed by the service's receipt key? The signer comes from the service's offer, or --signer",
    )
    .argument(
      "<receipt.json>",
      "the receipt as downloaded, an x402 answer, or {message, signature}; - reads stdin",
    )
    .option("--signer <address>", "the receipt key's address: no request to the service at all")
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn verify receipt.json
  pay-and-earn verify receipt.json --signer 0x90F79bf6EB2c4f870365E785982E1f101E93b906 --json`,
    )
    .action(async (file: string, options: { signer?: string }, command: Command) => {
      const global = command.optsWithGlobals<GlobalOptions>();
      const output = createOutput(global);
      let text: string;
      try {
        text = file === "-" ? await readStdin() : await readFile(file, "utf8");
      } catch (error) {
        throw new CliError(
          "unreadable_file",
          `unreadable_file: ${file}: ${reasonOfError(error)}`,
          2,
        );
      }
      // The receipt checker's own parse (GET/POST /verify), then POST /api/receipts/verify's.
      const pasted = checkedOption(file, pastedReceiptInput, text);
      const receipt = checkedOption(file, verifyReceiptRequest, pasted);
      const signer = options.signer
        ? checkedOption("--signer", addressInput, options.signer)
        : (await new ServiceClient(serviceUrl(global.service)).get("/api/info", offerResponse))
            .receipt_signer;
      const verdict = await checkReceiptOffline(receipt, signer);
      output.result({
        valid: verdict.valid,
        reason: verdict.reason,
        signer: verdict.signer,
        expected_signer: verdict.expectedSigner,
        facts: verdict.facts,
      });
      if (!verdict.valid) {
        throw new CliError(
          verdict.reason,
          `${verdict.reason}: ${verdict.words} (signed by ${verdict.signer ?? "nobody"}; the receipt key is ${verdict.expectedSigner})`,
        );
      }
      output.line(`Valid: ${verdict.words}`);
      output.fields([
        ["Signer", verdict.signer],
        ["Holder", verdict.facts?.Holder],
        ["Claim", verdict.facts?.Claim],
        ["Statement", verdict.facts?.Statement],
        ["Payment tx", verdict.facts?.["Payment tx"]],
        ["Payout tx", verdict.facts?.["Payout tx"]],
        ["Chain id", verdict.facts?.["Chain id"]],
        ["Issued at", verdict.facts?.["Issued at"]],
      ]);
    });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
