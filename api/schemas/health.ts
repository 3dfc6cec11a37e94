import { z } from "zod";

/** GET /api/health (the shape of api/health/checkHealth.ts's HealthReport). */
export const healthResponse = z.strictObject({
  status: z.enum(["ok", "degraded", "down"]),
  reasons: z.array(
    z.enum([
      "database_unreachable",
      "rpc_unreachable",
      "rpc_wrong_chain",
      "indexer_not_ready",
      "indexer_behind",
      "payout_wallet_low_usdc",
      "payout_wallet_low_eth",
      "matcher_behind",
      "payouts_waiting",
      "payouts_unconfirmed",
    ]),
  ),
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
  checked_at: z.string(),
});
