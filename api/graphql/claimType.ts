import { CLAIM_ID_PATTERN } from "../claims/claimIds.ts";
import { readClaim } from "../claims/readClaim.ts";
import { claimView } from "../http/claimResponses.ts";
import { claimResponse, claimStatus } from "../schemas/responses.ts";
import { builder } from "./builder.ts";

/** `claim(id)`: the public view of a claim, the same facts as GET /api/claims/{id}; no email. */

type ClaimView = ReturnType<typeof claimView>;

export const ClaimStatus = builder.enumType("ClaimStatus", {
  values: claimStatus.options,
});

export const ClaimFlow = builder.enumType("ClaimFlow", {
  description: "How the client pays: claim flow, x402 or mail.",
  values: claimResponse.shape.flow.options,
});

const ClaimType = builder.objectRef<ClaimView>("Claim").implement({
  fields: (t) => ({
    id: t.exposeID("claim_id"),
    status: t.field({ type: ClaimStatus, resolve: (claim) => claim.status }),
    flow: t.field({ type: ClaimFlow, resolve: (claim) => claim.flow }),
    payoutAddress: t.exposeString("payout_address"),
    agentName: t.exposeString("agent_name", { nullable: true }),
    payTo: t.exposeString("pay_to"),
    amountDueUsdc: t.exposeString("amount_due_usdc", {
      description: "The exact amount that pays this claim, six decimals.",
    }),
    payoutUsdc: t.exposeString("payout_usdc"),
    txHash: t.exposeString("tx_hash", {
      nullable: true,
      description: "The transaction the client named as its payment, if any.",
    }),
    createdAt: t.field({ type: "DateTime", resolve: (claim) => new Date(claim.created_at) }),
    expiresAt: t.field({ type: "DateTime", resolve: (claim) => new Date(claim.expires_at) }),
    paidAt: t.field({
      type: "DateTime",
      nullable: true,
      resolve: (claim) => (claim.paid_at ? new Date(claim.paid_at) : null),
    }),
    completedAt: t.field({
      type: "DateTime",
      nullable: true,
      resolve: (claim) => (claim.completed_at ? new Date(claim.completed_at) : null),
    }),
    paymentTx: t.string({
      nullable: true,
      description: "The transfer that paid the claim.",
      resolve: (claim) => claim.payment?.tx_hash ?? null,
    }),
    paymentExplorerUrl: t.string({
      nullable: true,
      resolve: (claim) => claim.payment?.explorer_url ?? null,
    }),
    payoutTx: t.exposeString("payout_tx", { nullable: true }),
    payoutExplorerUrl: t.exposeString("payout_explorer_url", { nullable: true }),
    failureReason: t.exposeString("failure_reason", { nullable: true }),
    nextStep: t.exposeString("next_step"),
    statusUrl: t.exposeString("status_url"),
    receiptUrl: t.exposeString("receipt_url"),
  }),
});

builder.queryField("claim", (t) =>
  t.field({
    type: ClaimType,
    nullable: true,
    description: "A claim by its id (clm_…); null if there is none.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, { deps }) => {
      const claimId = String(id);
      if (!CLAIM_ID_PATTERN.test(claimId)) return null;
      const claim = await readClaim(deps.sql, claimId);
      return claim ? claimView(deps.config, claim) : null;
    },
  }),
);
