import type { z } from "zod";
import { explorerTx } from "../chain/explorerLinks.ts";
import { networkName } from "../chain/networkId.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { hasUniqueAmount } from "../matching/qualifies.ts";
import { formatUsdc, formatUsdcFixed, PAYOUT_ATOMIC, PRICE_ATOMIC } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import type { claimResponse } from "../schemas/responses.ts";
import type { ClaimDetails } from "./readClaim.ts";

/**
 * A claim as clients see it (REST, MCP, A2A, mail, pages, the CLI): snake_case, amounts as
 * decimal strings, addresses checksummed, links absolute. Never the email address.
 */
export type ClaimView = z.infer<typeof claimResponse>;

/** Links and wording shared by every claim response. */
export function claimLinks(config: ServiceConfig, claimId: string) {
  const statusUrl = `${config.http.publicUrl}/api/claims/${claimId}`;
  return {
    status_url: statusUrl,
    receipt_url: `${statusUrl}/receipt`,
    attach_tx_url: `${statusUrl}/tx`,
  };
}

/** What to pay and where, in words and in fields, while a claim awaits payment. */
export function paymentInstructions(config: ServiceConfig, claim: ClaimDetails) {
  const payTo = config.chain.payTo;
  const payoutAddress = checksummed(claim.payoutAddress);
  const exact = formatUsdcFixed(claim.amountDue);
  const price = formatUsdc(PRICE_ATOMIC);
  const unique = hasUniqueAmount(config.claims.variant, PRICE_ATOMIC, claim.amountDue);
  const ways = unique
    ? [
        `Send exactly ${exact} USDC on Base to ${payTo}, from any wallet (exchanges included).`,
        `Or send at least ${price} USDC from ${payoutAddress}, the claim's payout address.`,
      ]
    : [
        ...(config.claims.variant === "A"
          ? [
              "No unique amount was free when this claim opened (the amount space is busy), so the amount alone cannot tell your payment apart: pay in one of these ways.",
            ]
          : []),
        `Send ${price} USDC on Base to ${payTo} from ${payoutAddress}, the claim's payout address.`,
        `From another wallet, send ${price} USDC and attach the transaction hash with that wallet's EIP-191 signature of "${claim.id}": POST ${claimLinks(config, claim.id).attach_tx_url} {"tx_hash", "signature"}.`,
      ];
  return {
    network: networkName(config),
    chain_id: config.chain.chainId,
    token: "USDC" as const,
    usdc_contract: config.chain.usdcAddress,
    pay_to: payTo,
    amount_usdc: unique ? exact : formatUsdcFixed(PRICE_ATOMIC),
    amount_atomic: String(unique ? claim.amountDue : PRICE_ATOMIC),
    unique_amount: unique,
    pay_before: claim.expiresAt.toISOString(),
    ways,
    warning:
      "One payment of at least the price earns exactly one payout of 1 USDC. Below the price " +
      "nothing is paid out; nothing is refunded.",
  };
}

const NEXT_STEPS: Record<ClaimDetails["status"], string> = {
  awaiting_payment: "Pay as described in payment_instructions, then poll status_url.",
  paid: "Payment confirmed; the 1 USDC payout is being sent.",
  paying: "The payout transaction is sent; waiting for it to be mined.",
  completed: "Done: the payout is mined and the receipt is at receipt_url.",
  failed: "The payout cannot be made; see failure_reason.",
  expired: "The claim expired unpaid. Create a new claim to pay.",
};

/** What the client should do next, in a sentence, for each state. */
export function nextStep(status: ClaimDetails["status"]): string {
  return NEXT_STEPS[status];
}

export function claimView(config: ServiceConfig, claim: ClaimDetails): ClaimView {
  const awaiting = claim.status === "awaiting_payment";
  return {
    claim_id: claim.id,
    status: claim.status,
    flow: claim.flow,
    payout_address: checksummed(claim.payoutAddress),
    agent_name: claim.agentName,
    email_receipt: claim.hasEmail,
    pay_to: config.chain.payTo,
    amount_due_usdc: formatUsdcFixed(claim.amountDue),
    payout_usdc: formatUsdc(PAYOUT_ATOMIC),
    tx_hash: claim.txHash,
    tx_hash_signed: claim.txHashSigned,
    created_at: claim.createdAt.toISOString(),
    expires_at: claim.expiresAt.toISOString(),
    paid_at: claim.paidAt?.toISOString() ?? null,
    completed_at: claim.completedAt?.toISOString() ?? null,
    payment: claim.payment
      ? {
          tx_hash: claim.payment.txHash,
          log_index: claim.payment.logIndex,
          from: checksummed(claim.payment.from),
          amount_usdc: formatUsdcFixed(claim.payment.value),
          matched_by: claim.payment.matchedBy,
          block_number: Number(claim.payment.blockNumber),
          explorer_url: explorerTx(config, claim.payment.txHash),
        }
      : null,
    payout_tx: claim.payoutTx,
    payout_explorer_url: explorerTx(config, claim.payoutTx),
    failure_reason: claim.failureReason,
    next_step: nextStep(claim.status),
    payment_instructions: awaiting ? paymentInstructions(config, claim) : null,
    ...claimLinks(config, claim.id),
  };
}
