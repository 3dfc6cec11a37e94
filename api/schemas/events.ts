import { z } from "zod";
import { codesOf, UNMATCHED_REASONS } from "../reasons/reasonCatalog.ts";
import { claimResponse } from "./responses.ts";

/**
 * The event envelope integrators receive by webhook, A2A push notification and the SSE stream
 * (docs/events.md), in the OpenAPI document's `webhooks`. Strict, like every response.
 */

const claimEventTypes = [
  "claim.created",
  "claim.paid",
  "claim.paying",
  "claim.completed",
  "claim.expired",
  "claim.failed",
] as const;

export const unmatchedPaymentSchema = z
  .strictObject({
    tx_hash: z.string(),
    log_index: z.number().int(),
    block_number: z.number().int(),
    from: z.string(),
    amount_usdc: z.string(),
    reason: z.enum(codesOf(UNMATCHED_REASONS)),
    explanation: z.string(),
    claim_id: z.string().nullable().meta({ description: "the claim it came closest to paying" }),
    explorer_url: z.string().nullable(),
  })
  .meta({ description: "A confirmed transfer to pay_to that paid no claim (not refunded)." });

const envelopeFields = {
  id: z.string().meta({
    description:
      "evt_ and a number: the same on every attempt and redelivery (the webhook-id header); deduplicate by it",
  }),
  time: z.string().meta({ description: "when the change was committed", format: "date-time" }),
};

export const claimEventEnvelope = z
  .strictObject({
    ...envelopeFields,
    type: z.enum(claimEventTypes),
    data: claimResponse,
  })
  .meta({
    description: "A claim changed; data is the claim as GET /api/claims/{id} showed it then",
  });

export const paymentEventEnvelope = z
  .strictObject({
    ...envelopeFields,
    type: z.literal("payment.unmatched"),
    data: unmatchedPaymentSchema,
  })
  .meta({ description: "A confirmed transfer paid no claim" });

export const eventEnvelopeSchema = z.union([claimEventEnvelope, paymentEventEnvelope]);

export const EVENT_TYPE_NAMES = [...claimEventTypes, "payment.unmatched"] as const;
