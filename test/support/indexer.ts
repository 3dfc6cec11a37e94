import { randomBytes } from "node:crypto";
import { webSocketUrlOf } from "../../scripts/devnet/devnetServiceEnv.ts";
import { startReadyPonder } from "../../scripts/devnet/ponder.ts";
import type { TestChain } from "./chain.ts";
import { childEnvironment } from "./childEnvironment.ts";
import { freePort } from "./ports.ts";

/**
 * Ponder indexing the test chain into the test database, ready (views created) on return.
 * `schema`: the build's schema (the same one resumes where it stopped, a new one re-indexes);
 * `port`: Ponder's first port (default: one free now); `viewsSchema`: where its views go (default
 * `chain`, which a second indexer on the same database would take over).
 * `wsUrl`: the node's WebSocket endpoint (INDEXER_WS_URL); by default Anvil's own, as the devnet
 * sets it. An idle Ponder that polls the latest block every 100 ms spends ~10% of a core, and
 * ~6% on the WebSocket (BENCHMARKS.md#test-suite); `false` polls, for the tests of polling.
 */
export function startTestIndexer(
  chain: Pick<TestChain, "rpcUrl" | "payTo" | "payout">,
  databaseUrl: string,
  options: { schema?: string; wsUrl?: string | false; port?: number; viewsSchema?: string } = {},
) {
  const { port } = options;
  return startReadyPonder(
    {
      env: testIndexerEnvironment(chain, databaseUrl, options.wsUrl),
      viewsSchema: options.viewsSchema,
      // Each test database is new, so any schema name is free; random keeps it obvious.
      schema: options.schema ?? `indexer_${randomBytes(4).toString("hex")}`,
      onLog: process.env.PONDER_TEST_LOGS ? (line) => console.error(`[ponder] ${line}`) : undefined,
    },
    // A port the caller chose is kept to; a free one is picked again if it was taken meanwhile.
    port === undefined ? freePort : async () => port,
    { attempts: port === undefined ? 3 : 1 },
  );
}

/** What a test Ponder indexes with, beside what any child process needs. */
export function testIndexerEnvironment(
  chain: Pick<TestChain, "rpcUrl" | "payTo" | "payout">,
  databaseUrl: string,
  wsUrl: string | false = webSocketUrlOf(chain.rpcUrl),
) {
  return {
    ...childEnvironment(),
    RPC_URL: chain.rpcUrl,
    CHAIN_ID: "8453",
    PAY_TO: chain.payTo.address,
    PAYOUT_ADDRESS: chain.payout.address,
    DATABASE_URL: databaseUrl,
    START_BLOCK: "0",
    INDEXER_POLLING_INTERVAL_MS: "100",
    ...(wsUrl ? { INDEXER_WS_URL: wsUrl } : {}),
  };
}
