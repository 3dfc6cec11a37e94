import { z } from "zod";
import { codesOf, RECEIPT_VERDICT_REASONS, UNMATCHED_REASONS } from "../reasons/reasonCatalog.ts";

/**
 * Response bodies of the REST surfaces. The handlers' results are typed by these schemas
 * (`z.infer`), the OpenAPI document is generated from them, and the integration tests check
 * every response they receive against that document: the three cannot drift apart.
 * Strict objects: a field added to a response without being documented fails the tests.
 */

const address = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/)
  .meta({ description: "0x address, checksummed" });
const txHash = z
  .string()
  .regex(/^0x[0-9a-f]{64}$/)
  .meta({ description: "transaction hash" });
const usdc = z
  .string()
  .regex(/^\d+(\.\d{1,6})?$/)
  .meta({ description: "USDC amount, decimal" });
const usdcFixed = z
  .string()
  .regex(/^\d+\.\d{6}$/)
  .meta({ description: "USDC, six decimal places" });
const timestamp = z.string().meta({ description: "ISO 8601 time", format: "date-time" });
const url = z.string().meta({ description: "URL" });

export const problemResponse = z
  .looseObject({
    type: z.string().meta({ description: "stable problem type, /problems/<code>" }),
    title: z.string(),
    status: z.number().int(),
    detail: z.string().optional(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  })
  .meta({ description: "RFC 9457 problem details" });

export const claimStatus = z.enum([
  "awaiting_payment",
  "paid",
  "paying",
  "completed",
  "failed",
  "expired",
]);

export const claimResponse = z.strictObject({
  claim_id: z.string(),
  status: claimStatus,
  flow: z.enum(["claim", "x402", "mail"]),
  payout_address: address,
  agent_name: z.string().nullable(),
  email_receipt: z
    .boolean()
    .meta({ description: "a receipt mail is sent (the address is never shown)" }),
  pay_to: address,
  amount_due_usdc: usdcFixed,
  payout_usdc: usdc,
  tx_hash: txHash
    .nullable()
    .meta({ description: "the transaction the client named as its payment" }),
  tx_hash_signed: z.boolean().meta({
    description: "tx_hash was attached with its sender's signature over the claim id",
  }),
  created_at: timestamp,
  expires_at: timestamp,
  paid_at: timestamp.nullable(),
  completed_at: timestamp.nullable(),
  payment: z
    .strictObject({
      tx_hash: txHash,
      log_index: z.number().int(),
      from: address,
      amount_usdc: usdcFixed,
      matched_by: z.enum(["x402", "tx_hash", "amount", "sender"]),
      block_number: z.number().int(),
      explorer_url: url.nullable(),
    })
    .nullable(),
  payout_tx: txHash.nullable(),
  payout_explorer_url: url.nullable(),
  failure_reason: z.string().nullable(),
  next_step: z.string(),
  payment_instructions: z
    .strictObject({
      network: z.string(),
      chain_id: z.number().int(),
      token: z.literal("USDC"),
      usdc_contract: address,
      pay_to: address,
      amount_usdc: usdcFixed,
      amount_atomic: z.string().regex(/^\d+$/),
      unique_amount: z.boolean().meta({
        description:
          "true: exactly amount_usdc, from any wallet, pays this claim (variant A). false: pay from the payout address or name the transaction (variant B, or variant A when no unique amount was free)",
      }),
      pay_before: timestamp,
      ways: z.array(z.string()),
      warning: z.string(),
    })
    .nullable()
    .meta({ description: "what to pay and where; only while awaiting payment" }),
  status_url: url,
  receipt_url: url,
  attach_tx_url: url,
});

const webhookSecret = z.string().optional().meta({
  description:
    "With webhook_url: the Standard Webhooks secret (whsec_…) the claim's events are signed with. Shown once; keep it.",
});

export const createdClaimResponse = claimResponse.extend({
  amount: usdcFixed.meta({ description: "the amount to pay (amount_due_usdc)" }),
  webhook_secret: webhookSecret,
});

export const attachedClaimResponse = claimResponse.extend({
  attached_tx: z.strictObject({
    tx_hash: txHash,
    state: z.enum(["matched", "awaiting_confirmations", "not_mined_yet"]).meta({
      description: "paid the claim / will once confirmed / will once mined and confirmed",
    }),
    signed: z.boolean().meta({ description: "attached with the sender's signature" }),
  }),
});

export const receiptResponse = z.strictObject({
  claim_id: z.string(),
  message: z.string(),
  signature: z.string().regex(/^0x[0-9a-fA-F]+$/),
  signer: address,
  issued_at: timestamp,
  verify_url: url,
});

const transactionOnChain = z.strictObject({
  state: z.enum(["on_chain", "reverted", "not_found", "unknown"]).meta({
    description:
      "mined successfully / mined and reverted / not in the chain / the RPC did not answer",
  }),
  block_number: z.number().int().nullable(),
  confirmations: z.number().int().nullable().meta({ description: "blocks on top of its block" }),
});

export const receiptVerdictResponse = z.strictObject({
  genuine: z.boolean(),
  current: z.boolean(),
  valid: z.boolean(),
  signer: address.nullable(),
  expected_signer: address,
  claim_id: z.string().nullable(),
  reason: z.enum(codesOf(RECEIPT_VERDICT_REASONS)),
  chain: z
    .strictObject({ payment: transactionOnChain, payout: transactionOnChain })
    .nullable()
    .meta({
      description:
        "What the chain says now of the payment and payout the receipt names (a reorg can take either away); null unless the receipt is genuine and names them",
    }),
});

export const paymentExplanationResponse = z.strictObject({
  tx_hash: txHash,
  explorer_url: url.nullable(),
  pay_to: address,
  summary: z.string(),
  transfers: z.array(
    z.strictObject({
      log_index: z.number().int(),
      from: address,
      amount_usdc: usdcFixed,
      block_number: z.number().int(),
      confirmations: z.number().int().nullable(),
      state: z.enum(["paid_claim", "unmatched", "awaiting_confirmations", "not_indexed_yet"]),
      claim_id: z.string().nullable(),
      claim_status: z.string().nullable(),
      matched_by: z.string().nullable(),
      reason: z.enum(codesOf(UNMATCHED_REASONS)).nullable(),
      explanation: z.string(),
    }),
  ),
});

export const x402DetailsResponse = z.strictObject({
  endpoint: z.string(),
  protocol: z.literal("x402 v2"),
  scheme: z.literal("exact"),
  network: z.string(),
  asset: address,
  amount_atomic: z.string(),
  amount_usdc: usdc,
  pay_to: address,
  max_timeout_seconds: z.number().int(),
  body: z.strictObject({ payout_address: z.string(), agent_name: z.string(), email: z.string() }),
  how: z.string(),
  spend_cap: z.string(),
  client_example_js: z.string(),
  facilitator: z.string(),
  discoverable_via: z.string(),
});

export const offerResponse = z.strictObject({
  service: z.string(),
  site: url,
  offer: z.string(),
  network: z.string(),
  chain_id: z.number().int(),
  testnet: z.boolean(),
  token: z.literal("USDC"),
  usdc_contract: address,
  pay_to: address,
  price_usdc: usdc,
  payout_usdc: usdc,
  explorer: url,
  matching_variant: z.enum(["A", "B"]),
  confirmations: z.number().int(),
  receipt_signer: address,
  payout_wallet: address,
  how_it_works: z.array(z.string()),
  x402: x402DetailsResponse,
  email: z.string(),
  endpoints: z.record(z.string(), z.string()),
  terms: z.array(z.string()),
});

const receiptInAnswer = z.strictObject({
  message: z.string(),
  signature: z.string(),
  signer: address,
  issued_at: timestamp,
});

export const x402PaidResponse = z.strictObject({
  claim_id: z.string(),
  status: claimStatus,
  payout_tx: txHash.nullable(),
  receipt: receiptInAnswer.nullable().meta({
    description: "null when the payout was not mined within the bounded wait: see receipt_url",
  }),
  payment: claimResponse.shape.payment,
  payout_address: address,
  agent_name: z.string().nullable(),
  status_url: url,
  receipt_url: url,
  detail: z.string().optional(),
  webhook_secret: webhookSecret,
});

export const x402PendingResponse = z.strictObject({
  claim_id: z.string(),
  status: claimStatus,
  status_url: url,
  receipt_url: url,
  attach_tx_url: url,
  detail: z.string(),
  webhook_secret: webhookSecret,
});

export const x402PaymentRequiredResponse = problemResponse
  .extend({
    x402Version: z.literal(2),
    error: z.string().optional(),
    resource: z.looseObject({ url: z.string() }),
    accepts: z.array(
      z.looseObject({ scheme: z.string(), network: z.string(), amount: z.string() }),
    ),
    extensions: z.record(z.string(), z.unknown()).optional(),
    reason: z.string().optional(),
  })
  .meta({ description: "the x402 terms, as in the PAYMENT-REQUIRED header, inside a problem" });
