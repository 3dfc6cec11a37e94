import { createHash } from "node:crypto";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  PAYMENT_ID_MAX_LENGTH,
  PAYMENT_ID_MIN_LENGTH,
  PAYMENT_ID_PATTERN,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import { z } from "zod";
import type { X402Terms } from "./x402Terms.ts";

/** Why a PAYMENT-SIGNATURE was refused before it reached the facilitator (catalog codes). */
export type PayloadRefusal =
  | "invalid_payment_header"
  | "unsupported_x402_version"
  | "unsupported_payload"
  | "scheme_mismatch"
  | "network_mismatch"
  | "asset_mismatch"
  | "amount_mismatch"
  | "pay_to_mismatch"
  | "requirements_mismatch"
  | "invalid_payment_identifier";

export interface CheckedPayment {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  /** Lowercase, as the indexer stores them. */
  payer: string;
  nonce: string;
  /**
   * The authorization's value (atomic units; the price, as checked): with the payer, the nonce
   * and pay_to, what a transfer must carry to be this payment (DESIGN.md §12).
   */
  value: bigint;
  /** Identifies the signed authorization: the same payment sent twice has the same digest. */
  digest: string;
  /** The client's idempotency id (x402 `payment-identifier` extension), if it sent one. */
  paymentIdentifier: string | null;
}

const hex = (digits: number) => new RegExp(`^0x[0-9a-fA-F]{${digits}}$`);
const decimal = z.string().regex(/^\d{1,78}$/);

// Only an EIP-3009 authorization is a payment here: the exact scheme also takes Permit2
// payloads, which emit no AuthorizationUsed and could not be told apart on chain.
const eip3009Payload = z.object({
  x402Version: z.literal(2),
  accepted: z.looseObject({
    scheme: z.string(),
    network: z.string(),
    asset: z.string(),
    amount: z.string(),
    payTo: z.string(),
  }),
  payload: z.object({
    authorization: z.object({
      from: z.string().regex(hex(40)),
      to: z.string().regex(hex(40)),
      value: decimal,
      validAfter: decimal,
      validBefore: decimal,
      nonce: z.string().regex(hex(64)),
    }),
    signature: z.string().regex(/^0x([0-9a-fA-F]{2}){65,}$/),
  }),
});

/**
 * The payment-identifier extension as a client sends it back: our declaration's `info` with the
 * client's id added. Checked against the schema we declared (x402Terms.ts), never against the
 * `schema` the client echoes with it: the SDK's `extractAndValidatePaymentIdentifier` compiles
 * that client-sent JSON Schema with a new Ajv on every call, which cost 9 to 15 ms of CPU per paid
 * request, and whose `pattern`s a sender can write to backtrack for as long as it likes, before
 * the signature is even verified (docs/traps.md#x402-sdk).
 */
const paymentIdentifierExtension = z.object({
  info: z.object({
    required: z.boolean(),
    id: z
      .string()
      .min(PAYMENT_ID_MIN_LENGTH)
      .max(PAYMENT_ID_MAX_LENGTH)
      .regex(PAYMENT_ID_PATTERN)
      .optional(),
  }),
});

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** Decodes and checks a PAYMENT-SIGNATURE header against our terms, with a precise refusal. */
export function checkPaymentHeader(
  header: string,
  terms: X402Terms,
): { ok: true; payment: CheckedPayment } | { ok: false; reason: PayloadRefusal } {
  let decoded: unknown;
  try {
    decoded = decodePaymentSignatureHeader(header);
  } catch {
    return { ok: false, reason: "invalid_payment_header" };
  }
  if ((decoded as { x402Version?: unknown } | null)?.x402Version !== 2) {
    return { ok: false, reason: "unsupported_x402_version" };
  }
  const parsed = eip3009Payload.safeParse(decoded);
  if (!parsed.success) return { ok: false, reason: "unsupported_payload" };

  const { accepted, payload } = parsed.data;
  const { authorization } = payload;
  const ours = terms.requirements;
  if (accepted.scheme !== ours.scheme) return { ok: false, reason: "scheme_mismatch" };
  if (accepted.network !== ours.network) return { ok: false, reason: "network_mismatch" };
  if (!same(accepted.asset, ours.asset)) return { ok: false, reason: "asset_mismatch" };
  if (accepted.amount !== ours.amount || authorization.value !== ours.amount) {
    return { ok: false, reason: "amount_mismatch" };
  }
  if (!same(accepted.payTo, ours.payTo) || !same(authorization.to, ours.payTo)) {
    return { ok: false, reason: "pay_to_mismatch" };
  }
  const paymentPayload = decoded as PaymentPayload;
  const requirements = terms.matching(paymentPayload);
  if (!requirements) return { ok: false, reason: "requirements_mismatch" };
  let paymentIdentifier: string | null = null;
  const extension = paymentPayload.extensions?.[PAYMENT_IDENTIFIER];
  if (extension) {
    // Clients echo our declaration back; it carries an id only when the client chose one.
    const extracted = paymentIdentifierExtension.safeParse(extension);
    if (!extracted.success) return { ok: false, reason: "invalid_payment_identifier" };
    paymentIdentifier = extracted.data.info.id ?? null;
  }

  return {
    ok: true,
    payment: {
      payload: paymentPayload,
      requirements,
      payer: authorization.from.toLowerCase(),
      nonce: authorization.nonce.toLowerCase(),
      value: BigInt(authorization.value),
      digest: createHash("sha256")
        .update(JSON.stringify([authorization, payload.signature.toLowerCase()]))
        .digest("hex"),
      paymentIdentifier,
    },
  };
}
