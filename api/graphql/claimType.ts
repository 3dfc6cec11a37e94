import { explorerTx } from "../chain/explorerLinks.ts";
import { claimLinks, nextStep } from "../claims/claimView.ts";
import type { ClaimDetails } from "../claims/readClaim.ts";
import { callbackIterator } from "../events/callbackIterator.ts";
import { formatUsdc, formatUsdcFixed, PAYOUT_ATOMIC } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import { claimResponse, claimStatus } from "../schemas/responses.ts";
import { badUserInput, builder } from "./builder.ts";

/** `claim(id)`: the public facts of a claim, as GET /api/claims/{id} has them; never an email. */

export const ClaimStatus = builder.enumType("ClaimStatus", {
  values: claimStatus.options,
});

export const ClaimFlow = builder.enumType("ClaimFlow", {
  description: "How the client pays: claim flow, x402 or mail.",
  values: claimResponse.shape.flow.options,
});

const ClaimType = builder.objectRef<ClaimDetails>("Claim").implement({
  fields: (t) => ({
    id: t.exposeID("id"),
    status: t.field({ type: ClaimStatus, resolve: (claim) => claim.status }),
    flow: t.field({ type: ClaimFlow, resolve: (claim) => claim.flow }),
    payoutAddress: t.string({ resolve: (claim) => checksummed(claim.payoutAddress) }),
    agentName: t.exposeString("agentName", { nullable: true }),
    payTo: t.string({ resolve: (_claim, _args, { core }) => core.config.chain.payTo }),
    amountDueUsdc: t.string({
      description: "The exact amount that pays this claim, six decimals.",
      resolve: (claim) => formatUsdcFixed(claim.amountDue),
    }),
    payoutUsdc: t.string({ resolve: () => formatUsdc(PAYOUT_ATOMIC) }),
    txHash: t.exposeString("txHash", {
      nullable: true,
      description: "The transaction the client named as its payment, if any.",
    }),
    createdAt: t.field({ type: "DateTime", resolve: (claim) => claim.createdAt }),
    expiresAt: t.field({ type: "DateTime", resolve: (claim) => claim.expiresAt }),
    paidAt: t.field({ type: "DateTime", nullable: true, resolve: (claim) => claim.paidAt }),
    completedAt: t.field({
      type: "DateTime",
      nullable: true,
      resolve: (claim) => claim.completedAt,
    }),
    paymentTx: t.string({
      nullable: true,
      description: "The transfer that paid the claim.",
      resolve: (claim) => claim.payment?.txHash ?? null,
    }),
    paymentExplorerUrl: t.string({
      nullable: true,
      resolve: (claim, _args, { core }) => explorerTx(core.config, claim.payment?.txHash ?? null),
    }),
    payoutTx: t.exposeString("payoutTx", { nullable: true }),
    payoutExplorerUrl: t.string({
      nullable: true,
      resolve: (claim, _args, { core }) => explorerTx(core.config, claim.payoutTx),
    }),
    failureReason: t.exposeString("failureReason", { nullable: true }),
    nextStep: t.string({ resolve: (claim) => nextStep(claim.status) }),
    statusUrl: t.string({
      resolve: (claim, _args, { core }) => claimLinks(core.config, claim.id).status_url,
    }),
    receiptUrl: t.string({
      resolve: (claim, _args, { core }) => claimLinks(core.config, claim.id).receipt_url,
    }),
  }),
});

builder.subscriptionField("claimChanged", (t) =>
  t.field({
    type: ClaimType,
    description:
      "The claim each time it changes (over SSE: Accept: text/event-stream), its changes so far first. Ends after EVENT_STREAM_MAX_SECONDS; at most EVENT_STREAMS_PER_CLIENT at once (docs/events.md#live-streams).",
    args: { id: t.arg.id({ required: true }) },
    subscribe: async (_root, { id }, { core, client }) => {
      const opened = await core.openClaimEventStream(String(id), undefined, client);
      if (opened.type !== "stream") {
        throw badUserInput(
          opened.type === "claim_not_found"
            ? "No such claim"
            : "Too many live streams from this client",
          [{ argument: "id", message: opened.type }],
        );
      }
      const { stream } = opened;
      const feed = callbackIterator<ClaimDetails>(() => stream.close());
      const end = setTimeout(feed.close, stream.endsAt.getTime() - Date.now());
      end.unref();
      stream.start(({ claim }) => {
        if (claim) feed.push(claim);
      });
      return feed.iterator;
    },
    resolve: (claim) => claim,
  }),
);

builder.queryField("claim", (t) =>
  t.field({
    type: ClaimType,
    nullable: true,
    description: "A claim by its id (clm_…); null if there is none.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, { core }) => {
      const result = await core.getClaim(String(id));
      return result.type === "claim" ? result.claim : null;
    },
  }),
);
