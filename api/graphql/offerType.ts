import type { Offer } from "../offer/buildOffer.ts";
import { builder } from "./builder.ts";

/** `offer`: the offer document (SPEC.md), typed field by field, and whole as `document`. */

const X402Details = builder.objectRef<Offer["x402"]>("X402Details").implement({
  description: "How to pay and earn in one request with x402 (the offer's `x402` object).",
  fields: (t) => ({
    endpoint: t.exposeString("endpoint"),
    protocol: t.exposeString("protocol"),
    scheme: t.exposeString("scheme"),
    network: t.exposeString("network", { description: "CAIP-2 network, eip155:8453." }),
    asset: t.exposeString("asset", { description: "The USDC contract." }),
    amountAtomic: t.exposeString("amount_atomic"),
    amountUsdc: t.exposeString("amount_usdc"),
    payTo: t.exposeString("pay_to"),
    maxTimeoutSeconds: t.exposeInt("max_timeout_seconds"),
    body: t.field({
      type: "JSON",
      description: "The request body's fields and what each is.",
      resolve: (x402) => x402.body,
    }),
    how: t.exposeString("how"),
    spendCap: t.exposeString("spend_cap"),
    clientExampleJs: t.exposeString("client_example_js"),
    facilitator: t.exposeString("facilitator"),
    discoverableVia: t.exposeString("discoverable_via"),
  }),
});

const OfferType = builder.objectRef<Offer>("Offer").implement({
  description: "What the service sells and how to pay (GET /api/info), in camelCase.",
  fields: (t) => ({
    service: t.exposeString("service"),
    site: t.exposeString("site"),
    offer: t.exposeString("offer", { description: "The trade in one sentence." }),
    network: t.exposeString("network"),
    chainId: t.exposeInt("chain_id"),
    testnet: t.exposeBoolean("testnet"),
    token: t.exposeString("token"),
    usdcContract: t.exposeString("usdc_contract"),
    payTo: t.exposeString("pay_to"),
    priceUsdc: t.exposeString("price_usdc"),
    payoutUsdc: t.exposeString("payout_usdc"),
    explorer: t.exposeString("explorer"),
    matchingVariant: t.exposeString("matching_variant"),
    confirmations: t.exposeInt("confirmations"),
    receiptSigner: t.exposeString("receipt_signer"),
    payoutWallet: t.exposeString("payout_wallet"),
    howItWorks: t.exposeStringList("how_it_works"),
    x402: t.field({ type: X402Details, resolve: (offer) => offer.x402 }),
    email: t.exposeString("email", { description: "How the mail flow works here." }),
    endpoints: t.field({
      type: "JSON",
      description: 'Role name → "METHOD path".',
      resolve: (offer) => offer.endpoints,
    }),
    terms: t.exposeStringList("terms"),
    document: t.field({
      type: "JSON",
      description: "The offer document exactly as GET /api/info serves it (snake_case).",
      resolve: (offer) => offer,
    }),
  }),
});

builder.queryField("offer", (t) =>
  t.field({
    type: OfferType,
    description: "The offer: price, payout, where to pay, how, and the terms.",
    resolve: (_root, _args, { core }) => core.offer,
  }),
);
