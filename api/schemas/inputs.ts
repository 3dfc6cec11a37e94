import { type Address, zeroAddress } from "viem";
import { z } from "zod";
import { strictChecksummed } from "./checksummedAddress.ts";

/**
 * Request schemas of the public surfaces (REST, and later MCP and GraphQL), snake_case as on
 * the wire. They check shape only; rules that need state (is the claim open?) live in the
 * domain. Kept free of `.meta({ id })`: MCP clients choke on it (STACK.md).
 */

/** `clm_` + at least 96 random bits, URL-safe (see api/claims/claimIds.ts). */
export const CLAIM_ID_PATTERN = /^clm_[A-Za-z0-9_-]{16,43}$/;

export const claimIdInput = z
  .string({ message: "must be a string" })
  .regex(CLAIM_ID_PATTERN, { message: "is not a claim id (clm_…)" });

export const addressInput = z
  .string({ message: "must be a string" })
  .trim()
  .refine((value) => strictChecksummed(value) !== null, {
    message: "must be a 0x address: 40 hex digits, and a valid EIP-55 checksum if mixed-case",
  })
  .refine((value) => value.toLowerCase() !== zeroAddress, {
    message: "must not be the zero address",
  })
  .transform((value) => strictChecksummed(value) as Address);

export const txHashInput = z
  .string({ message: "must be a string" })
  .trim()
  .regex(/^0x[0-9a-fA-F]{64}$/, { message: "must be a transaction hash: 0x and 64 hex digits" })
  .transform((value) => value.toLowerCase() as `0x${string}`);

export const emailInput = z
  .string({ message: "must be a string" })
  .trim()
  .max(254, { message: "must be at most 254 characters" })
  .pipe(z.email({ message: "must be an email address" }));

// Every "other" character (\p{C}): controls (Cc), format characters (Cf: zero-width space
// and joiner, U+2060, U+FEFF, bidirectional overrides and isolates, tag characters), private
// use (Co), unassigned code points (Cn) and lone surrogates (Cs); and line and paragraph
// separators. An agent name is shown on a public page and read by agents: it must read as what
// it is, and no name may pass for another by an invisible difference.
const INVISIBLE_OR_UNPRINTABLE = /[\p{C}\u2028\u2029]/u;

/**
 * Trimmed and normalised to NFC before it is stored or compared, so "café" typed as
 * e + U+0301 and as U+00E9 is one name: on the ledger, in its filter, on every surface.
 */
export const agentNameInput = z
  .string({ message: "must be a string" })
  // Checked before trimming: trim() would silently drop a leading or trailing U+FEFF.
  .refine((value) => !INVISIBLE_OR_UNPRINTABLE.test(value), {
    message:
      "must not contain control, invisible (zero-width, format, tag), private-use or unassigned characters",
  })
  .trim()
  .normalize("NFC")
  .min(1, { message: "must not be empty" })
  .max(64, { message: "must be at most 64 characters" });

/**
 * Where the claim's events are posted, signed (docs/events.md). Checked again when each
 * delivery connects: a name must resolve to public addresses only.
 */
export const webhookUrlInput = z
  .string({ message: "must be a string" })
  .max(2_048, { message: "must be at most 2048 characters" })
  .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), {
    message: "must be an http(s) URL",
  })
  .refine(
    (value) => !URL.canParse(value) || (!new URL(value).username && !new URL(value).password),
    {
      message: "must not carry credentials",
    },
  )
  .meta({
    description:
      "URL that receives this claim's events (claim.created … claim.completed), signed per Standard Webhooks with the webhook_secret of the creation's answer: https on port 443, public addresses only. A creation naming one always opens a new claim.",
  });

export const createClaimRequest = z.strictObject({
  payout_address: addressInput,
  tx_hash: txHashInput.optional(),
  email: emailInput.optional(),
  agent_name: agentNameInput.optional(),
  webhook_url: webhookUrlInput.optional(),
});

export const attachTxRequest = z.strictObject({
  tx_hash: txHashInput,
  signature: z
    .string({ message: "must be a string" })
    .regex(/^0x[0-9a-fA-F]{130}$/, {
      message: "must be a 65-byte signature: 0x and 130 hex digits",
    })
    .transform((value) => value as `0x${string}`)
    .optional()
    .meta({
      description:
        "EIP-191 (personal_sign) signature of the claim id by the wallet that sent the transfer: needed when the transfer comes from a wallet other than the claim's payout address and another claim might name it.",
    }),
});

export const verifyReceiptRequest = z.strictObject({
  message: z
    .string({ message: "must be a string" })
    .min(1, { message: "must not be empty" })
    .max(4_000, { message: "must be at most 4000 characters" }),
  signature: z
    .string({ message: "must be a string" })
    .regex(/^0x[0-9a-fA-F]{130}$/, {
      message: "must be a 65-byte signature: 0x and 130 hex digits",
    })
    .transform((value) => value as `0x${string}`),
});

export const x402EarnRequest = z.strictObject({
  payout_address: addressInput,
  agent_name: agentNameInput.optional(),
  email: emailInput.optional(),
  webhook_url: webhookUrlInput.optional(),
});
