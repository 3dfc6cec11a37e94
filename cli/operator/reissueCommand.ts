import type { Command } from "commander";
import type { ReissueOutcome } from "../../api/payouts/reissuePayout.ts";
import type { GlobalOptions } from "../commands/options.ts";
import { CliError } from "../errors.ts";
import { createOutput } from "../output.ts";

export function registerReissuePayout(program: Command): void {
  program
    .command("reissue-payout")
    .description(
      "operator: re-issue, once, the payout of a claim whose nonce a foreign transaction took (health: payout_nonce_taken), after checking the chain (reads the service's configuration)",
    )
    .argument("<claim_id>", "the claim whose payout to re-issue")
    .addHelpText(
      "after",
      `
Refused unless the nonce is used PAYOUT_CONFIRMATIONS blocks deep and none of the payout's own
attempts was mined: only then can the old payout never move USDC. Once per claim, ever.
A settle-and-pay payout (x402) carried the claim's payment too, so it was never paid: the
claim gets a new settle-and-pay while the payer's authorization is unused and valid (and
SETTLE_AND_PAY_ADDRESS, its code and the wallet's allowance to it are right in these settings),
or fails (no payout) once it was used elsewhere or ran out; a plain payout only once the claim
was paid by its authorization meanwhile, as the matcher records it.

Examples:
  pay-and-earn payouts --stuck
  pay-and-earn reissue-payout clm_Xq3vL9c2Rk7TnW1bYp4sJg`,
    )
    .action(async (claimId: string, _options: unknown, command: Command) => {
      const output = createOutput(command.optsWithGlobals<GlobalOptions>());
      // Loaded when it runs: the database client and the chain reads are not for --help.
      const [{ connect, requireServiceConfig }, { reissuePayout }, { createPayoutRpc }] =
        await Promise.all([
          import("./operatorContext.ts"),
          import("../../api/payouts/reissuePayout.ts"),
          import("../../api/payouts/payoutRpc.ts"),
        ]);
      const config = requireServiceConfig();
      const connections = connect(config);
      let outcome: ReissueOutcome;
      try {
        outcome = await reissuePayout(
          {
            sql: connections.sql,
            wallet: config.payout.address,
            usdc: config.chain.usdcAddress,
            payTo: config.chain.payTo,
            settleAndPay: config.x402.settleAndPay,
            confirmations: config.payouts.confirmations,
          },
          createPayoutRpc(config.chain.rpcUrl, config.chain.chainId),
          claimId,
        );
      } finally {
        await connections.close();
      }
      if (!isResolved(outcome)) {
        throw new CliError(outcome.type, `${outcome.type}: ${refusal(outcome, claimId)}`);
      }
      output.result({
        claim_id: claimId,
        outcome: outcome.type,
        abandoned_nonce: outcome.nonce,
        ...(outcome.type === "claim_failed" ? { failure_reason: outcome.reason } : {}),
      });
      output.line(resolution(outcome, claimId));
    });
}

type Resolved = Extract<
  ReissueOutcome,
  { type: "reissued" | "settling_again" | "claim_failed" | "abandoned" }
>;

function isResolved(outcome: ReissueOutcome): outcome is Resolved {
  return ["reissued", "settling_again", "claim_failed", "abandoned"].includes(outcome.type);
}

function resolution(outcome: Resolved, claimId: string): string {
  const abandoned = `payout nonce ${outcome.nonce} is abandoned`;
  switch (outcome.type) {
    case "reissued":
      return `Re-issued: ${abandoned}; the payout sender signs a new payout for ${claimId}.`;
    case "settling_again":
      return `Re-issued: ${abandoned}; it had settled nothing, and the payer's authorization is unused and valid until ${new Date(Number(outcome.validBefore) * 1000).toISOString()}, so the payout sender signs a new settle-and-pay for ${claimId} (its payment and payout in one transaction again).`;
    case "claim_failed":
      return `Not paid out: ${abandoned} and ${claimId} failed (x402_settlement_failed, ${outcome.reason}): ${outcome.detail}. It had settled nothing, so no payout is sent.`;
    case "abandoned":
      return `Abandoned: ${abandoned}; ${claimId} is ${outcome.claimStatus}, so nothing is sent.`;
  }
}

function refusal(outcome: Exclude<ReissueOutcome, Resolved>, claimId: string): string {
  switch (outcome.type) {
    case "claim_not_found":
      return `no claim ${claimId}`;
    case "not_waiting_on_taken_nonce":
      return `not re-issued: ${outcome.detail}`;
    case "already_reissued":
      return `not re-issued: ${claimId} was already re-issued once; look at it by hand`;
    case "not_final":
      return `not re-issued, not final yet: ${outcome.detail}`;
    case "attempt_mined":
      return `not re-issued: attempt ${outcome.txHash} was mined; the confirmer will store it`;
    case "needs_a_person":
      return `not re-issued, look at it by hand: ${outcome.detail}`;
    case "payment_not_recorded":
      return `not re-issued yet, the claim is paid by its own authorization: ${outcome.detail}; run this again once the claim is paid`;
  }
}
