import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { registerEarn } from "./commands/earn.ts";
import { registerInfo } from "./commands/info.ts";
import { registerLedger } from "./commands/ledger.ts";
import { registerPayment } from "./commands/payment.ts";
import { registerReceipt } from "./commands/receipt.ts";
import { registerStatus } from "./commands/status.ts";
import { registerVerify } from "./commands/verify.ts";
import { registerClaims } from "./operator/claimsCommand.ts";
import { registerDoctor } from "./operator/doctorCommand.ts";
import { registerPayouts } from "./operator/payoutsCommand.ts";
import { registerReissuePayout } from "./operator/reissueCommand.ts";
import { registerWebhooks } from "./operator/webhooksCommand.ts";

/** `pay-and-earn`: every command, the options they share, and their help. */
export function buildProgram(): Command {
  const program = new Command("pay-and-earn")
    .description(
      "Pay 10 USDC, earn 1 USDC back and a signed receipt, from a terminal; and check a deployment's health.",
    )
    .option(
      "--service <url>",
      "the service's base URL (default: PAY_AND_EARN_URL, else http://localhost:3000)",
    )
    .option("--json", "print one JSON document instead of lines for people")
    .version(packageVersion(), "--version", "the CLI's version")
    .showSuggestionAfterError()
    // Before the commands are added: they inherit it, and main.ts decides the exit code.
    .exitOverride()
    .addHelpText(
      "after",
      `
Earners:   earn, status, receipt, verify, payment, ledger, info
Operators: doctor, payouts --stuck, claims --status failed, reissue-payout, webhooks (read the service's own configuration)

Example:
  PAYER_PRIVATE_KEY=0x… pay-and-earn earn --via x402 --payout 0x976EA74026E726554dB657fA54763abd0C3a0aa9`,
    );
  registerEarn(program);
  registerStatus(program);
  registerReceipt(program);
  registerVerify(program);
  registerPayment(program);
  registerLedger(program);
  registerInfo(program);
  registerDoctor(program);
  registerPayouts(program);
  registerClaims(program);
  registerReissuePayout(program);
  registerWebhooks(program);
  return program;
}

function packageVersion(): string {
  const packageJson = readFileSync(join(import.meta.dirname, "..", "package.json"), "utf8");
  return (JSON.parse(packageJson) as { version: string }).version;
}
