import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { z } from "zod";
import {
  address,
  chainSettings,
  type Environment,
  parseWith,
  privateKey,
  webSocketUrl,
  wholeNumber,
} from "./settings.ts";

/**
 * The indexer's settings (ponder.config.ts): the chain, the token and the two addresses whose
 * transfers it records. It never gets a key it does not need (the payout address, not its key).
 */

/** The indexer's settings, each saying what it means (docs/configuration.md is written from them). */
export const indexerSettings = {
  ...chainSettings,
  PAYOUT_ADDRESS: address
    .optional()
    .describe(
      "The payout wallet's address, which Ponder indexes as outgoing; unset: derived from `PAYOUT_PRIVATE_KEY`. `npm start` passes the address, never the key, to Ponder.",
    ),
  PAYOUT_PRIVATE_KEY: privateKey.optional(),
  START_BLOCK: wholeNumber(0)
    .default(0)
    .describe(
      "First block to index (the block `pay_to` was first used); required by `npm start` with `RPC_URL`.",
    ),
  INDEXER_POLLING_INTERVAL_MS: wholeNumber(50, 60_000)
    .default(1_000)
    .describe("How often Ponder polls the RPC for new blocks (250 on the devnet)."),
  /**
   * With it Ponder is told of each new block (`eth_subscribe` newHeads) and fetches it once,
   * instead of fetching the latest block with all its transactions every polling interval
   * (docs/traps.md#ponder). Polling is its fallback when the socket fails.
   */
  INDEXER_WS_URL: webSocketUrl
    .optional()
    .describe(
      "The node's `ws(s)://` endpoint: Ponder is told of new blocks instead of polling for them (the devnet sets Anvil's). Set it in production when the provider has one.",
    ),
};

const indexerSchema = z
  .object(indexerSettings)
  .superRefine((settings, context) => {
    if (!settings.PAYOUT_ADDRESS && !settings.PAYOUT_PRIVATE_KEY) {
      context.addIssue({
        code: "custom",
        path: ["PAYOUT_ADDRESS"],
        message: "is required (or PAYOUT_PRIVATE_KEY, from which it is derived)",
      });
    }
  })
  .transform((settings) => ({
    rpcUrl: settings.RPC_URL,
    chainId: settings.CHAIN_ID,
    usdcAddress: settings.USDC_ADDRESS,
    payTo: settings.PAY_TO,
    payoutAddress:
      settings.PAYOUT_ADDRESS ?? privateKeyToAccount(settings.PAYOUT_PRIVATE_KEY as Hex).address,
    startBlock: settings.START_BLOCK,
    pollingIntervalMs: settings.INDEXER_POLLING_INTERVAL_MS,
    wsUrl: settings.INDEXER_WS_URL,
    databaseUrl: settings.DATABASE_URL,
  }));

export type IndexerConfig = z.output<typeof indexerSchema>;

export function parseIndexerConfig(env: Environment = process.env): IndexerConfig {
  return parseWith(indexerSchema, env);
}
