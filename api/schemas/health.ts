import { z } from "zod";
import { codesOf, HEALTH_REASONS } from "../reasons/reasonCatalog.ts";

/** GET /api/health (the shape of api/health/checkHealth.ts's HealthReport). */
export const healthResponse = z.strictObject({
  status: z.enum(["ok", "degraded", "down"]),
  reasons: z.array(z.enum(codesOf(HEALTH_REASONS))),
  database: z.strictObject({ ok: z.boolean() }),
  chain: z.strictObject({
    ok: z.boolean(),
    chain_id: z.number().int(),
    head_block: z.number().int().nullable(),
  }),
  indexer: z.strictObject({
    ok: z.boolean(),
    indexed_block: z.number().int().nullable(),
    lag_blocks: z.number().int().nullable(),
  }),
  payouts: z
    .strictObject({
      ok: z.boolean(),
      wallet: z.string().nullable(),
      usdc_balance: z.string().nullable(),
      eth_balance: z.string().nullable(),
      claims_paid: z.number().int().nullable(),
      payouts_unfinished: z.number().int().nullable(),
    })
    .nullable(),
  backlog: z
    .strictObject({
      ok: z.boolean(),
      matcher: z
        .strictObject({
          cursor_block: z.number().int().nullable(),
          waiting_transfers: z.number().int(),
          lag_blocks: z.number().int(),
          oldest_waiting_seconds: z.number().nullable(),
        })
        .nullable(),
      payouts: z.strictObject({
        claims_paid: z.number().int(),
        oldest_paid_seconds: z.number().nullable(),
        payouts_unfinished: z.number().int(),
        oldest_unfinished_seconds: z.number().nullable(),
      }),
      max_age_seconds: z.strictObject({ matcher: z.number(), payouts: z.number() }),
    })
    .nullable(),
  attention: z
    .strictObject({
      payout_nonce_taken: z.number().int(),
      payout_wallet_foreign_transfer: z.number().int(),
      x402_settlement_lost: z.number().int(),
      payout_without_payment: z.number().int(),
      claim_paid_twice: z.number().int(),
      payout_missing_on_chain: z.number().int(),
    })
    .nullable()
    .meta({ description: "what waits for a person, by health reason (see reasons)" }),
  amount_space: z
    .strictObject({
      ok: z.boolean(),
      held: z.number().int(),
      size: z.number().int(),
      fill_ratio: z.number(),
      warn_ratio: z.number(),
    })
    .nullable()
    .meta({
      description:
        "variant A: the unique amounts held now (claims open or within AMOUNT_HOLD_SECONDS of expiry) out of AMOUNT_SPACE_SIZE; null in variant B",
    }),
  mail: z
    .strictObject({
      ok: z.boolean(),
      intake: z
        .strictObject({
          transport: z.enum(["smtp", "imap"]),
          ok: z.boolean(),
          last_ok_at: z.string().nullable(),
          last_ok_seconds: z.number().int().nullable(),
          last_error: z.string().nullable(),
          last_error_at: z.string().nullable(),
        })
        .nullable(),
      outbox: z.strictObject({
        sending: z.boolean(),
        pending: z.number().int(),
        oldest_pending_seconds: z.number().int().nullable(),
        failed: z.number().int(),
        failed_last_day: z.number().int(),
      }),
      max_age_seconds: z.strictObject({ intake: z.number(), outbox: z.number() }),
    })
    .nullable(),
  checked_at: z.string(),
});

export type HealthJson = z.output<typeof healthResponse>;
