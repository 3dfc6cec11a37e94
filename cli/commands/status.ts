import type { Command } from "commander";
import type { z } from "zod";
import { isFinalClaimStatus } from "../../api/schemas/claimStatus.ts";
import { claimIdInput } from "../../api/schemas/inputs.ts";
import { claimResponse } from "../../api/schemas/responses.ts";
import { watchClaim } from "../claimWatch.ts";
import { claimEnded } from "../errors.ts";
import { createOutput, type Output } from "../output.ts";
import { ServiceClient, serviceUrl } from "../serviceClient.ts";
import { runSteps } from "../steps.ts";
import { checkedOption, type GlobalOptions } from "./options.ts";

type Claim = z.output<typeof claimResponse>;

export function registerStatus(program: Command): void {
  program
    .command("status")
    .description("where a claim stands: its status, payment, payout and next step")
    .argument("<claim_id>", "the claim (clm_…)")
    .option("--watch", "follow the claim until it is completed, failed or expired")
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn status clm_3mJq0cX9yWq1bKQ8vYbJ2w
  pay-and-earn status clm_3mJq0cX9yWq1bKQ8vYbJ2w --watch --json`,
    )
    .action(async (id: string, options: { watch?: boolean }, command: Command) => {
      const global = command.optsWithGlobals<GlobalOptions>();
      const output = createOutput(global);
      const claimId = checkedOption("<claim_id>", claimIdInput, id);
      const service = new ServiceClient(serviceUrl(global.service));
      const read = () => service.get(`/api/claims/${claimId}`, claimResponse);
      let claim = await read();
      if (options.watch && !isFinalClaimStatus(claim.status)) {
        const context = { claim };
        await runSteps(
          [
            {
              title: `Watch ${claimId}`,
              async run(ctx, progress) {
                progress.update(statusLine(ctx.claim));
                // The claim's event stream; polled only where the service has none.
                const pollMs = Number(process.env.PAY_AND_EARN_POLL_MS) || 2000;
                for await (const next of watchClaim(service, claimId, read, pollMs)) {
                  // The stream starts with the claim's history: a final state in it (expired,
                  // then paid after all) is believed once the claim as it is now says so.
                  ctx.claim = isFinalClaimStatus(next.status) ? await read() : next;
                  progress.update(statusLine(ctx.claim));
                  if (isFinalClaimStatus(ctx.claim.status))
                    return `${claimId}: ${statusLine(ctx.claim)}`;
                }
                return `${claimId}: ${statusLine(ctx.claim)}`;
              },
            },
          ],
          context,
          output,
        );
        claim = context.claim;
      }
      output.result(claim);
      if (!options.watch) showClaim(output, claim);
      // A watch that ends without the payout says so in its exit code, for scripts.
      if (options.watch && (claim.status === "failed" || claim.status === "expired")) {
        throw claimEnded(claim);
      }
    });
}

function statusLine(claim: Claim): string {
  return `${claim.status}: ${claim.next_step}`;
}

export function showClaim(output: Output, claim: Claim): void {
  output.fields([
    ["Claim", claim.claim_id],
    ["Status", claim.status],
    ["Flow", claim.flow],
    ["Payout to", claim.payout_address],
    ["Agent name", claim.agent_name],
    ["Amount due", `${claim.amount_due_usdc} USDC to ${claim.pay_to}`],
    [
      "Payment",
      claim.payment
        ? `${claim.payment.tx_hash} (${claim.payment.amount_usdc} USDC from ${claim.payment.from}, matched by ${claim.payment.matched_by})`
        : null,
    ],
    ["Payout tx", claim.payout_tx],
    ["Failure", claim.failure_reason],
    ["Expires", claim.status === "awaiting_payment" ? claim.expires_at : null],
    ["Next step", claim.next_step],
  ]);
}
