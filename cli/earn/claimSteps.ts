import type { Address, Hex } from "viem";
import { formatUsdc, parseUsdc } from "../../api/money.ts";
import {
  attachedClaimResponse,
  claimResponse,
  createdClaimResponse,
} from "../../api/schemas/responses.ts";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { CliError, claimEnded, reasonOfError } from "../errors.ts";
import { checkPinnedClaimAmount, PINNED } from "../pinnedTerms.ts";
import type { Step } from "../steps.ts";
import type { EarnContext } from "./earnContext.ts";
import { offerOf, usdcWords, waitOrGiveUp } from "./sharedSteps.ts";

/**
 * The claim flow from a terminal: create a claim, send its exact amount from the paying wallet,
 * name the transfer with the wallet's signature of the claim id (the strongest link, in either
 * matching variant), then wait for the confirmations and the payout.
 */

export const claimPlanStep: Step<EarnContext> = {
  title: "Dry run: what would be paid",
  enabled: (context) => context.dryRun,
  async run(context) {
    const offer = offerOf(context);
    const amount =
      offer.matching_variant === "A"
        ? `${offer.price_usdc}.000001 to ${offer.price_usdc}.999999 USDC (the claim fixes the exact amount)`
        : `${offer.price_usdc} USDC`;
    context.plan = [
      `create a claim paying out ${offer.payout_usdc} USDC to ${context.request.payout_address}`,
      `send ${amount} to ${offer.pay_to} on ${offer.network} (chain ${offer.chain_id}, USDC ${offer.usdc_contract})${context.account ? ` from ${context.account.address}` : ""}`,
      "name that transfer on the claim, signed by the paying wallet",
    ];
    return `Dry run: would ${context.plan.join("; then ")}. Nothing was created or sent.`;
  },
};

export const createClaimStep: Step<EarnContext> = {
  title: "Create the claim",
  enabled: (context) => !context.dryRun,
  async run(context) {
    const { body: claim } = await context.service.request("/api/claims", createdClaimResponse, {
      body: context.request,
    });
    context.claimId = claim.claim_id;
    context.status = claim.status;
    context.amountAtomic = parseUsdc(claim.amount_due_usdc);
    checkPinnedClaimAmount(claim.claim_id, context.amountAtomic);
    const funds = context.funds;
    if (funds && funds.usdc < context.amountAtomic) {
      throw new CliError(
        "insufficient_usdc",
        `insufficient_usdc: ${funds.address} holds ${formatUsdc(funds.usdc)} USDC, claim ${claim.claim_id} asks for ${claim.amount_due_usdc}; nothing was sent (the claim expires unpaid)`,
      );
    }
    return `Claim ${claim.claim_id} created: pay exactly ${claim.amount_due_usdc} USDC to ${claim.pay_to}`;
  },
};

export const sendPaymentStep: Step<EarnContext> = {
  title: "Send the payment",
  enabled: (context) => !context.dryRun,
  async run(context, progress) {
    const offer = offerOf(context);
    const { chain, account, claimId, amountAtomic } = context;
    if (!chain || !account || !claimId || amountAtomic === undefined) {
      throw new Error("the wallet is checked and the claim created first");
    }
    let hash: Hex;
    try {
      hash = await chain.wallet.writeContract({
        address: PINNED.usdcContract,
        abi: usdcAbi,
        functionName: "transfer",
        args: [offer.pay_to as Address, amountAtomic],
      });
    } catch (error) {
      throw new CliError("transfer_failed", `transfer_failed: ${reasonOfError(error)}`);
    }
    context.paymentTx = hash;
    progress.update(`Transfer ${hash} sent, waiting for it to be mined`);
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") {
      throw new CliError(
        "transfer_reverted",
        `transfer_reverted: ${hash} reverted: nothing was paid`,
      );
    }
    progress.update(`Mined in block ${receipt.blockNumber}; naming it on ${claimId}`);
    const signature = await account.signMessage({ message: claimId });
    try {
      await context.service.request(`/api/claims/${claimId}/tx`, attachedClaimResponse, {
        body: { tx_hash: hash, signature },
      });
    } catch (error) {
      // The matcher may have matched it by its amount first: then the claim shows this payment.
      const claim = await context.service.get(`/api/claims/${claimId}`, claimResponse);
      if (claim.payment?.tx_hash !== hash) throw error;
    }
    return `Sent ${usdcWords(amountAtomic)} in ${hash} (block ${receipt.blockNumber})`;
  },
};

/** Until the payment has the service's confirmations and pays the claim. */
export const confirmationsStep: Step<EarnContext> = {
  title: "Wait for confirmations",
  enabled: (context) => !context.dryRun,
  async run(context, progress) {
    const offer = offerOf(context);
    const { chain, claimId, paymentTx } = context;
    if (!chain || !claimId || !paymentTx) throw new Error("the payment is sent first");
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: paymentTx as Hex });
    for (;;) {
      const claim = await context.service.get(`/api/claims/${claimId}`, claimResponse);
      context.status = claim.status;
      if (claim.status !== "awaiting_payment") {
        if (claim.status === "expired" || claim.status === "failed") {
          throw claimEnded(claim);
        }
        return `Payment confirmed and matched (${claim.payment?.matched_by ?? "?"}): claim ${claim.status}`;
      }
      const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
      const confirmations = Number(head - receipt.blockNumber + 1n);
      progress.update(
        `${Math.min(confirmations, offer.confirmations)}/${offer.confirmations} confirmations`,
      );
      await waitOrGiveUp(context, `the confirmations of ${paymentTx}`);
    }
  },
};
