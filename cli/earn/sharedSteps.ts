import { setTimeout as sleep } from "node:timers/promises";
import type { Hex } from "viem";
import { formatUsdc, parseUsdc } from "../../api/money.ts";
import { claimResponse, offerResponse, receiptResponse } from "../../api/schemas/responses.ts";
import { CliError, claimEnded } from "../errors.ts";
import { checkWallet, describeFunds, payerChain, payerRpcUrl } from "../payer.ts";
import { checkPinnedOffer } from "../pinnedTerms.ts";
import { checkReceiptOffline } from "../receiptCheck.ts";
import type { Step } from "../steps.ts";
import type { EarnContext, Offer } from "./earnContext.ts";

export function offerOf(context: EarnContext): Offer {
  if (!context.offer) throw new Error("the offer is read first");
  return context.offer;
}

export const readOfferStep: Step<EarnContext> = {
  title: "Read the offer",
  async run(context) {
    const offer = await context.service.get("/api/info", offerResponse);
    checkPinnedOffer(offer);
    context.offer = offer;
    return `Offer: pay ${offer.price_usdc} USDC to ${offer.pay_to} on ${offer.network} (chain ${offer.chain_id}), get ${offer.payout_usdc} USDC back`;
  },
};

/** The RPC's chain and the wallet's USDC (and ETH for the claim flow's own transfer). */
export const checkWalletStep: Step<EarnContext> = {
  title: "Check the paying wallet",
  enabled: (context) => context.account !== undefined,
  async run(context, progress) {
    const offer = offerOf(context);
    const account = context.account;
    if (!account) return "No wallet to check";
    // x402 needs no chain access of its own (the service settles): its wallet is checked only
    // on an RPC the user named; the claim flow sends a transfer, so it needs one.
    const rpcUrl =
      context.via === "x402" && !context.rpcOption && !process.env.PAYER_RPC_URL
        ? undefined
        : payerRpcUrl(context.rpcOption, offer);
    if (!rpcUrl) {
      if (context.via === "x402")
        return "Wallet not checked beforehand (no --rpc): the service checks the payment";
      throw new CliError(
        "no_rpc",
        `no_rpc: the claim flow sends a transfer on chain ${offer.chain_id}: pass --rpc <url> (or set PAYER_RPC_URL)`,
        2,
      );
    }
    progress.update(`Asking ${rpcUrl}`);
    context.chain = payerChain(account, rpcUrl, offer);
    context.funds = await checkWallet(
      context.chain,
      account.address,
      offer,
      parseUsdc(offer.price_usdc),
      { needsGas: context.via === "claim" },
    );
    return describeFunds(context.funds, offer);
  },
};

/** Polls the claim until its payout is mined (completed); failed and expired end the run. */
export const payoutStep: Step<EarnContext> = {
  title: "Wait for the payout",
  enabled: (context) => !context.dryRun && context.status !== "completed",
  async run(context, progress) {
    const claimId = context.claimId as string;
    for (;;) {
      const claim = await context.service.get(`/api/claims/${claimId}`, claimResponse);
      context.status = claim.status;
      context.payoutTx = claim.payout_tx;
      if (claim.status === "completed") {
        return `Payout ${claim.payout_tx} mined: ${claim.payout_usdc} USDC to ${claim.payout_address}`;
      }
      if (claim.status === "failed" || claim.status === "expired") {
        throw claimEnded(claim);
      }
      progress.update(
        claim.payout_tx
          ? `${claim.status}: payout ${claim.payout_tx} sent, waiting for it to be mined`
          : `${claim.status}: ${claim.next_step}`,
      );
      await waitOrGiveUp(context, `the payout of ${claimId} (${claim.status})`);
    }
  },
};

/** The receipt, fetched unless the x402 answer carried it, and checked offline. */
export const receiptStep: Step<EarnContext> = {
  title: "Fetch and check the receipt",
  enabled: (context) => !context.dryRun,
  async run(context) {
    const offer = offerOf(context);
    if (!context.receipt) {
      context.receipt = await context.service.get(
        `/api/claims/${context.claimId}/receipt`,
        receiptResponse,
      );
    }
    const { message, signature } = context.receipt;
    const verdict = await checkReceiptOffline(
      { message, signature: signature as Hex },
      offer.receipt_signer,
    );
    context.verdict = verdict;
    if (!verdict.valid) {
      throw new CliError(
        "receipt_not_valid",
        `receipt_not_valid: ${verdict.reason}: ${verdict.words} (signer ${verdict.signer ?? "none"}, the service publishes ${offer.receipt_signer})`,
      );
    }
    return `Receipt signed by ${verdict.signer}, checked offline: the service's receipt key`;
  },
};

export async function waitOrGiveUp(context: EarnContext, what: string): Promise<void> {
  if (Date.now() > context.deadline) {
    throw new CliError(
      "timeout",
      `timeout: still waiting for ${what}; follow it with: pay-and-earn status ${context.claimId} --watch`,
    );
  }
  await sleep(context.pollMs);
}

export function usdcWords(atomic: bigint): string {
  return `${formatUsdc(atomic)} USDC`;
}
