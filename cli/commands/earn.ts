import { type Command, Option } from "commander";
import { addressInput, agentNameInput, emailInput } from "../../api/schemas/inputs.ts";
import type { EarnContext } from "../earn/earnContext.ts";
import { CliError, sentence } from "../errors.ts";
import { createOutput } from "../output.ts";
import { payerAccount } from "../payer.ts";
import { payingServiceUrl, ServiceClient } from "../serviceClient.ts";
import { runSteps } from "../steps.ts";
import { checkedOption, type GlobalOptions, seconds } from "./options.ts";

interface EarnOptions extends GlobalOptions {
  via: "claim" | "x402";
  payout: string;
  agentName?: string;
  email?: string;
  rpc?: string;
  dryRun?: boolean;
  timeout: string;
}

export function registerEarn(program: Command): void {
  program
    .command("earn")
    .description(
      "pay the price in USDC and earn the payout and a signed receipt; the key comes from PAYER_PRIVATE_KEY",
    )
    .addOption(
      new Option("--via <flow>", "claim (create a claim, send a transfer) or x402 (one request)")
        .choices(["claim", "x402"])
        .default("claim"),
    )
    .requiredOption("--payout <address>", "where the payout goes (0x…)")
    .option("--agent-name <name>", "shown on the public ledger")
    .option("--email <address>", "the receipt is mailed here too")
    .option(
      "--rpc <url>",
      "chain RPC for the paying wallet (default: PAYER_RPC_URL, else Base's public RPC)",
    )
    .option("--dry-run", "show what would be paid; create, sign and send nothing")
    .option("--timeout <seconds>", "give up waiting for the payout after this long", "600")
    .addHelpText(
      "after",
      `
Examples:
  PAYER_PRIVATE_KEY=0x… pay-and-earn earn --via x402 --payout 0x976EA74026E726554dB657fA54763abd0C3a0aa9
  PAYER_PRIVATE_KEY=0x… pay-and-earn earn --via claim --payout 0x976E… --agent-name my-agent --rpc http://127.0.0.1:8545
  pay-and-earn earn --via x402 --payout 0x976E… --dry-run`,
    )
    .action(async (options: EarnOptions, command: Command) => {
      const global = command.optsWithGlobals<EarnOptions>();
      const output = createOutput(global);
      const request = {
        payout_address: checkedOption("--payout", addressInput, options.payout),
        ...(options.agentName !== undefined
          ? { agent_name: checkedOption("--agent-name", agentNameInput, options.agentName) }
          : {}),
        ...(options.email !== undefined
          ? { email: checkedOption("--email", emailInput, options.email) }
          : {}),
      };
      const timeoutSeconds = checkedOption("--timeout", seconds, options.timeout);
      const context: EarnContext = {
        via: options.via,
        dryRun: options.dryRun === true,
        request,
        service: new ServiceClient(payingServiceUrl(global.service)),
        rpcOption: options.rpc,
        // A dry run without a key still shows the terms; a real run never starts without one.
        account: options.dryRun && !process.env.PAYER_PRIVATE_KEY ? undefined : payerAccount(),
        // How often the claim is asked about while waiting (tests shorten it).
        pollMs: Number(process.env.PAY_AND_EARN_POLL_MS) || 1000,
        deadline: Date.now() + timeoutSeconds * 1000,
      };
      // Loaded when a payment is made, not for every command: the x402 client is heavy.
      const { earnSteps } = await import("../earn/earnSteps.ts");
      try {
        await runSteps(earnSteps(options.via), context, output);
      } catch (error) {
        throw withPaymentToFollow(error, context);
      }
      const result = {
        via: context.via,
        dry_run: context.dryRun,
        ...(context.dryRun
          ? { plan: context.plan ?? [] }
          : {
              claim_id: context.claimId ?? null,
              status: context.status ?? null,
              payment_tx: context.paymentTx ?? null,
              payout_tx: context.payoutTx ?? null,
              // The same four fields whichever way it came (x402 answer or receipt route).
              receipt: context.receipt
                ? {
                    message: context.receipt.message,
                    signature: context.receipt.signature,
                    signer: context.receipt.signer,
                    issued_at: context.receipt.issued_at,
                  }
                : null,
              receipt_check: context.verdict
                ? {
                    valid: context.verdict.valid,
                    reason: context.verdict.reason,
                    signer: context.verdict.signer,
                  }
                : null,
            }),
      };
      output.result(result);
      if (!context.dryRun && context.claimId) {
        output.line();
        output.line(`Keep the receipt: pay-and-earn receipt ${context.claimId} --out receipt.json`);
      }
    });
}

/**
 * A failure once the money has left (the claim flow's transfer, an x402 settlement) says where
 * it went and how to follow it: the claim still completes without this process.
 */
function withPaymentToFollow(error: unknown, context: EarnContext): unknown {
  const { claimId, paymentTx } = context;
  if (!(error instanceof CliError) || !claimId || !paymentTx) return error;
  if (["claim_failed", "claim_expired", "timeout"].includes(error.code)) return error;
  return new CliError(
    error.code,
    `${sentence(error.message)} The payment ${paymentTx} is sent for ${claimId}: follow it with pay-and-earn status ${claimId} --watch`,
    error.exitCode,
  );
}
