import { getAddress, isAddress, zeroAddress } from "viem";
import { z } from "zod";

/**
 * Request schemas of the public surfaces (REST, and later MCP and GraphQL), snake_case as on
 * the wire. They check shape only; rules that need state (is the claim open?) live in the
 * domain. Kept free of `.meta({ id })`: MCP clients choke on it (STACK.md).
 */

export const addressInput = z
  .string({ message: "must be a string" })
  .trim()
  .refine((value) => isAddress(value, { strict: true }), {
    message: "must be a 0x address: 40 hex digits, and a valid EIP-55 checksum if mixed-case",
  })
  .refine((value) => value.toLowerCase() !== zeroAddress, {
    message: "must not be the zero address",
  })
  .transform((value) => getAddress(value));

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

// Control characters, bidirectional overrides and isolates, line and paragraph separators:
// an agent name is shown on a public page and must read as what it is.
const UNPRINTABLE = /[\p{Cc}\u200E\u200F\u202A-\u202E\u2066-\u2069\u2028\u2029]/u;

export const agentNameInput = z
  .string({ message: "must be a string" })
  .trim()
  .min(1, { message: "must not be empty" })
  .max(64, { message: "must be at most 64 characters" })
  .refine((value) => !UNPRINTABLE.test(value), {
    message: "must not contain control or text-direction characters",
  });

export const createClaimRequest = z.strictObject({
  payout_address: addressInput,
  tx_hash: txHashInput.optional(),
  email: emailInput.optional(),
  agent_name: agentNameInput.optional(),
});

export const attachTxRequest = z.strictObject({ tx_hash: txHashInput });

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
});
