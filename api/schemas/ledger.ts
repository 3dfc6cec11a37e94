import { z } from "zod";
import { agentNameInput } from "./inputs.ts";
import { decodeLedgerCursor } from "./ledgerCursor.ts";

/**
 * The public ledger of completed payouts (GET /api/ledger; GET /ledger and GraphQL `ledger`
 * take the same query). Plain zod, no `.meta({ id })`: fit for zod-openapi and MCP alike.
 */

export const LEDGER_DEFAULT_LIMIT = 20;
export const LEDGER_MAX_LIMIT = 100;

export const ledgerLimitInput = z.coerce
  .number({ message: "must be a number" })
  .int({ message: "must be a whole number" })
  .min(1, { message: "must be at least 1" })
  .max(LEDGER_MAX_LIMIT, { message: `must be at most ${LEDGER_MAX_LIMIT}` })
  .meta({ description: `Entries per page, 1 to ${LEDGER_MAX_LIMIT}.` });

export const ledgerCursorInput = z
  .string({ message: "must be a string" })
  .transform((text, context) => {
    const cursor = decodeLedgerCursor(text);
    if (cursor) return cursor;
    context.issues.push({
      code: "custom",
      input: text,
      message: "is not a cursor of this ledger: pass next_cursor exactly as it was returned",
    });
    return z.NEVER;
  })
  .meta({ description: "Opaque: the `next_cursor` of the previous page." });

const ledgerTimeInput = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], {
    message: "must be an ISO 8601 date-time (2025-01-31T12:00:00Z) or date (2025-01-31)",
  })
  .transform((text) => new Date(text));

export const ledgerQuery = z
  .object({
    limit: ledgerLimitInput.default(LEDGER_DEFAULT_LIMIT),
    cursor: ledgerCursorInput.optional(),
    agent_name: agentNameInput
      .optional()
      .meta({ description: "Only payouts of claims with exactly this agent_name." }),
    since: ledgerTimeInput.optional().meta({
      description: "Only payouts completed at or after this time (a date is UTC midnight).",
    }),
    until: ledgerTimeInput
      .optional()
      .meta({ description: "Only payouts completed before this time (a date is UTC midnight)." }),
  })
  .refine((query) => !query.since || !query.until || query.since < query.until, {
    message: "must be after since",
    path: ["until"],
  })
  .meta({ description: "Query of GET /api/ledger. Unknown parameters are ignored." });

const hash = z.string().regex(/^0x[0-9a-f]{64}$/);
const usdcDecimal = z.string().regex(/^\d+\.\d{6}$/);

export const ledgerEntry = z
  .strictObject({
    claim_id: z.string().meta({ description: "The claim this payout completed." }),
    agent_name: z
      .string()
      .nullable()
      .meta({ description: "The agent_name given on the claim, as given; null if none." }),
    flow: z
      .enum(["claim", "x402", "mail"])
      .meta({ description: "How the client paid: claim flow, x402 or mail." }),
    payout_address: z
      .string()
      .regex(/^0x[0-9a-fA-F]{40}$/)
      .meta({ description: "Where the payout went, EIP-55 checksummed." }),
    amount_usdc: usdcDecimal.meta({ description: "Payout amount in USDC, six decimals." }),
    payment_tx: hash
      .nullable()
      .meta({ description: "The client's payment transaction (null if not on record)." }),
    payout_tx: hash.meta({ description: "The payout transaction." }),
    completed_at: z.iso.datetime().meta({ description: "When the payout was confirmed (UTC)." }),
    payment_explorer_url: z.url().nullable(),
    payout_explorer_url: z.url(),
    payout_address_explorer_url: z.url(),
  })
  .meta({ description: "One completed payout. Emails are never shown." });

export const ledgerResponse = z
  .strictObject({
    entries: z.array(ledgerEntry).meta({ description: "Newest first." }),
    next_cursor: z
      .string()
      .nullable()
      .meta({ description: "Pass as `cursor` for the next (older) page; null on the last page." }),
    next_url: z.url().nullable().meta({ description: "The next page, filters kept; or null." }),
    limit: z.number().int().meta({ description: "The page size used." }),
  })
  .meta({
    description:
      "Recent completed payouts, newest first, in pages linked by an opaque cursor that new " +
      "payouts do not shift.",
  });

export type LedgerQuery = z.output<typeof ledgerQuery>;
export type LedgerEntryJson = z.output<typeof ledgerEntry>;
export type LedgerResponse = z.output<typeof ledgerResponse>;
