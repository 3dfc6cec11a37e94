import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { PAYMENT_REFUSAL_REASONS } from "../../api/reasons/reasonCatalog.ts";
import {
  problemResponse,
  x402PaidResponse,
  x402PendingResponse,
} from "../../api/schemas/responses.ts";
import { CliError, reasonOfError, sentence } from "../errors.ts";
import { PINNED } from "../pinnedTerms.ts";
import { parseAnswer, problemError, readJson } from "../serviceClient.ts";
import type { Step } from "../steps.ts";
import type { EarnContext, Offer } from "./earnContext.ts";
import { offerOf } from "./sharedSteps.ts";

const EARN_PATH = "/api/x402/earn";

/**
 * x402 from a terminal, with the official client (@x402/fetch): its spend cap raised to exactly
 * the offer's price, never more, and only terms that match the offer word for word (scheme
 * exact, network, USDC contract, pay_to, amount) are signed; anything else is refused before
 * a signature exists.
 */

/**
 * The terms this CLI signs: the pinned price, token and chain (cli/pinnedTerms.ts), to the
 * offer's pay_to, and nothing else.
 */
export function matchesOffer(offer: Offer, requirement: PaymentRequirements): boolean {
  return (
    requirement.scheme === "exact" &&
    requirement.network === PINNED.network &&
    requirement.asset.toLowerCase() === PINNED.usdcContract.toLowerCase() &&
    requirement.payTo.toLowerCase() === offer.pay_to.toLowerCase() &&
    requirement.amount === String(PINNED.priceAtomic)
  );
}

function describeTerms(requirement: PaymentRequirements): string {
  return `${requirement.amount} atomic units of ${requirement.asset} to ${requirement.payTo} on ${requirement.network} (${requirement.scheme})`;
}

/** Dry run: the 402's terms, read without paying and held against the offer. */
export const x402PlanStep: Step<EarnContext> = {
  title: "Dry run: read the x402 terms",
  enabled: (context) => context.dryRun,
  async run(context) {
    const offer = offerOf(context);
    const response = await context.service.send(EARN_PATH, { body: context.request });
    const header = response.headers.get("payment-required");
    if (response.status !== 402 || !header) {
      throw problemError(response.status, await readJson(response, EARN_PATH), EARN_PATH);
    }
    const terms = decodePaymentRequiredHeader(header);
    const matching = terms.accepts.filter((requirement) => matchesOffer(offer, requirement));
    if (matching.length === 0) {
      throw new CliError(
        "x402_terms_refused",
        `x402_terms_refused: the service asks for ${terms.accepts.map(describeTerms).join(" or ")}, which is not the offer's ${offer.x402.amount_usdc} USDC to ${offer.pay_to}; nothing would be signed`,
      );
    }
    context.plan = [
      `sign one EIP-3009 authorization of ${offer.x402.amount_usdc} USDC (${offer.usdc_contract}) to ${offer.pay_to} on eip155:${offer.chain_id}${context.account ? ` from ${context.account.address}` : ""}, spend cap ${offer.x402.amount_usdc} USDC`,
      `POST ${EARN_PATH} for a payout of ${offer.payout_usdc} USDC to ${context.request.payout_address}`,
    ];
    return `Dry run: would ${context.plan.join("; then ")}. Nothing was signed or sent.`;
  },
};

export const x402PayStep: Step<EarnContext> = {
  title: "Pay with x402",
  enabled: (context) => !context.dryRun,
  async run(context, progress) {
    const offer = offerOf(context);
    const account = context.account;
    if (!account) throw new Error("the key is read first");
    const network = PINNED.network;
    const client = x402Client.fromConfig({
      schemes: [{ network, client: new ExactEvmScheme(account) }],
      spendControls: {
        maxAmountPerPayment: PINNED.spendCap,
        allowedAssets: [
          {
            network,
            asset: PINNED.usdcContract,
            maxAmountPerPayment: String(PINNED.priceAtomic),
          },
        ],
      },
      policies: [(_version, requirements) => requirements.filter((r) => matchesOffer(offer, r))],
    });
    let signed = false;
    client.onAfterPaymentCreation(async () => {
      signed = true;
      progress.update(
        `Authorization of ${offer.x402.amount_usdc} USDC to ${offer.pay_to} signed; the service settles it, then pays out`,
      );
    });
    progress.update(`Asking ${context.service.baseUrl}${EARN_PATH} for its terms`);
    let response: Response;
    try {
      response = await context.service.send(EARN_PATH, {
        body: context.request,
        fetcher: wrapFetchWithPayment(fetch, client),
      });
    } catch (error) {
      throw x402Failure(error, signed, offer);
    }
    const body = await readJson(response, EARN_PATH);
    if (response.status === 402) {
      const problem = problemResponse.safeParse(body);
      const reason = (problem.success ? problem.data.reason : undefined) as
        | keyof typeof PAYMENT_REFUSAL_REASONS
        | undefined;
      const words = reason && PAYMENT_REFUSAL_REASONS[reason];
      throw new CliError(
        reason ?? "payment_refused",
        `${reason ?? "payment_refused"}: ${sentence(words ?? (problem.success ? (problem.data.detail ?? problem.data.title) : "the payment was refused"))} Nothing was paid.`,
      );
    }
    if (response.status === 202) {
      const pending = parseAnswer(x402PendingResponse, body, EARN_PATH);
      context.claimId = pending.claim_id;
      context.status = pending.status;
      return `Payment sent; its settlement is not known yet: claim ${pending.claim_id} (${pending.detail})`;
    }
    if (!response.ok) throw problemError(response.status, body, EARN_PATH);
    const paid = parseAnswer(x402PaidResponse, body, EARN_PATH);
    context.claimId = paid.claim_id;
    context.status = paid.status;
    context.payoutTx = paid.payout_tx;
    context.receipt = paid.receipt;
    const settlementHeader = response.headers.get("payment-response");
    const settlement = settlementHeader ? decodePaymentResponseHeader(settlementHeader) : null;
    context.paymentTx = settlement?.transaction ?? paid.payment?.tx_hash;
    return `Paid ${offer.x402.amount_usdc} USDC in ${context.paymentTx ?? "a settlement"}: claim ${paid.claim_id} ${paid.status}${paid.payout_tx ? `, payout ${paid.payout_tx}` : ""}`;
  },
};

/** Why the x402 request did not come back, said for what it means for the payer's money. */
function x402Failure(error: unknown, signed: boolean, offer: Offer): CliError {
  const reason =
    error instanceof CliError ? error.message.slice(error.code.length + 2) : reasonOfError(error);
  if (signed) {
    // The authorization left this machine: the service may settle it (and pay out) even though
    // its answer never came. Paying again could pay twice.
    return new CliError(
      "x402_outcome_unknown",
      `x402_outcome_unknown: the signed payment was sent, but no answer came (${reason}); it may still settle and pay out: look for the payer's transfer to pay_to (then pay-and-earn payment <tx_hash>) before paying again`,
    );
  }
  if (error instanceof CliError) return error;
  if (/spendControls|filtered out by policies/.test(reason)) {
    return new CliError(
      "x402_terms_refused",
      `x402_terms_refused: the service's x402 terms are not the offer's ${offer.x402.amount_usdc} USDC to ${offer.pay_to} on eip155:${offer.chain_id}; nothing was signed`,
    );
  }
  return new CliError("x402_client_error", `x402_client_error: ${reason}; nothing was paid`);
}
