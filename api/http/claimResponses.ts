import { getAddress } from "viem";
import type { z } from "zod";
import type { ClaimDetails } from "../claims/readClaim.ts";
import type { ServiceConfig } from "../config.ts";
import { formatUsdc, formatUsdcFixed, PAYOUT_ATOMIC, PRICE_ATOMIC } from "../money.ts";
import type { claimResponse } from "../schemas/responses.ts";

/** Links and wording shared by every claim response. */
export function claimLinks(config: ServiceConfig, claimId: string) {
  const statusUrl = `${config.http.publicUrl}/api/claims/${claimId}`;
  return {
    status_url: statusUrl,
    receipt_url: `${statusUrl}/receipt`,
    attach_tx_url: `${statusUrl}/tx`,
  };
}

export function explorerTx(config: ServiceConfig, hash: string | null): string | null {
  return hash ? `${config.chain.explorerUrl}/tx/${hash}` : null;
}

/** What to pay and where, in words and in fields, while a claim awaits payment. */
export function paymentInstructions(config: ServiceConfig, claim: ClaimDetails) {
  const payTo = config.chain.payTo;
  const payoutAddress = getAddress(claim.payoutAddress);
  const exact = formatUsdcFixed(claim.amountDue);
  const price = formatUsdc(PRICE_ATOMIC);
  const ways =
    config.claims.variant === "A"
      ? [
          `Send exactly ${exact} USDC on Base to ${payTo}, from any wallet (exchanges included).`,
          `Or send at least ${price} USDC from ${payoutAddress}, the claim's payout address.`,
        ]
      : [
          `Send ${price} USDC on Base to ${payTo} from ${payoutAddress}, the claim's payout address.`,
          `From another wallet, send ${price} USDC and attach the transaction hash: POST ${claimLinks(config, claim.id).attach_tx_url}.`,
        ];
  return {
    network: "Base",
    chain_id: config.chain.chainId,
    token: "USDC" as const,
    usdc_contract: config.chain.usdcAddress,
    pay_to: payTo,
    amount_usdc: config.claims.variant === "A" ? exact : formatUsdcFixed(PRICE_ATOMIC),
    amount_atomic: String(config.claims.variant === "A" ? claim.amountDue : PRICE_ATOMIC),
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

export function claimView(
  config: ServiceConfig,
  claim: ClaimDetails,
): z.infer<typeof claimResponse> {
  const awaiting = claim.status === "awaiting_payment";
  return {
    claim_id: claim.id,
    status: claim.status,
    flow: claim.flow,
    payout_address: getAddress(claim.payoutAddress),
    agent_name: claim.agentName,
    email_receipt: claim.hasEmail,
    pay_to: config.chain.payTo,
    amount_due_usdc: formatUsdcFixed(claim.amountDue),
    payout_usdc: formatUsdc(PAYOUT_ATOMIC),
    tx_hash: claim.txHash,
    created_at: claim.createdAt.toISOString(),
    expires_at: claim.expiresAt.toISOString(),
    paid_at: claim.paidAt?.toISOString() ?? null,
    completed_at: claim.completedAt?.toISOString() ?? null,
    payment: claim.payment
      ? {
          tx_hash: claim.payment.txHash,
          log_index: claim.payment.logIndex,
          from: getAddress(claim.payment.from),
          amount_usdc: formatUsdcFixed(claim.payment.value),
          matched_by: claim.payment.matchedBy,
          block_number: Number(claim.payment.blockNumber),
          explorer_url: explorerTx(config, claim.payment.txHash),
        }
      : null,
    payout_tx: claim.payoutTx,
    payout_explorer_url: explorerTx(config, claim.payoutTx),
    failure_reason: claim.failureReason,
    next_step: NEXT_STEPS[claim.status],
    payment_instructions: awaiting ? paymentInstructions(config, claim) : null,
    ...claimLinks(config, claim.id),
  };
}
