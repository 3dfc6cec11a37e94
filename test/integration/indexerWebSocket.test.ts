import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webSocketUrlOf } from "../../scripts/devnet/devnetServiceEnv.ts";
import type { RunningPonder } from "../../scripts/devnet/ponder.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import { startTestIndexer } from "../support/indexer.ts";
import { type RpcCall, startRpcProxy } from "../support/rpcProxy.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * INDEXER_WS_URL: Ponder learns of new blocks from the node's WebSocket and fetches each once, by
 * hash. Polling, it fetches the latest block with every transaction in it each interval, which for
 * blocks of thousands of payments kept Anvil busy on both cores (BENCHMARKS.md#payouts).
 * Its HTTP calls go through the tests' proxy, which counts them; the WebSocket goes to Anvil.
 */

let setup: ChainWithDatabase;
let proxy: Awaited<ReturnType<typeof startRpcProxy>>;
let ponder: RunningPonder | undefined;

beforeAll(async () => {
  setup = await startChainWithDatabase();
  proxy = await startRpcProxy(setup.chain.rpcUrl);
});

afterAll(async () => {
  await ponder?.stop();
  await proxy?.stop();
  await setup?.stop();
});

const fetchesOfLatest = (calls: RpcCall[]) =>
  calls.filter((call) => call.method === "eth_getBlockByNumber" && call.params[0] === "latest");

/** Five payments to pay_to, each mined in a block of its own and waited for in the index. */
async function fivePaymentsIndexed(): Promise<Hex[]> {
  const { chain, sql } = setup;
  const [payer] = chain.users;
  if (!payer) throw new Error("no user account");
  const hashes: Hex[] = [];
  for (let payment = 0; payment < 5; payment++) {
    const hash = await chain.transferUsdc(payer, chain.payTo.address, USDC);
    await waitFor(
      async () =>
        (await sql`select 1 from chain.incoming_transfer where tx_hash = ${hash}`).length > 0,
      { what: `payment ${payment + 1} in the index` },
    );
    hashes.push(hash);
  }
  return hashes;
}

async function indexerThroughProxy(schema: string, wsUrl?: string) {
  await ponder?.stop();
  ponder = await startTestIndexer({ ...setup.chain, rpcUrl: proxy.url }, setup.database.url, {
    schema,
    wsUrl: wsUrl ?? false,
  });
  proxy.reset();
}

describe("the indexer on the node's WebSocket (INDEXER_WS_URL)", () => {
  it("indexes new blocks without fetching the latest block over and over", async () => {
    await indexerThroughProxy("indexer_ws", webSocketUrlOf(setup.chain.rpcUrl));
    const hashes = await fivePaymentsIndexed();

    const calls = [...proxy.calls];
    expect(fetchesOfLatest(calls)).toHaveLength(0);
    // Each new block was fetched by hash, with its transactions, once it was announced.
    const byHash = calls.filter((call) => call.method === "eth_getBlockByHash");
    expect(byHash.length).toBeGreaterThanOrEqual(hashes.length);
    expect(byHash.every((call) => call.params[1] === true)).toBe(true);
  });

  it("learns of every block by fetching the latest one, with its transactions, without it", async () => {
    await indexerThroughProxy("indexer_polling");
    await fivePaymentsIndexed();

    const latest = fetchesOfLatest(proxy.calls);
    // Five new blocks, each seen only by a poll of the latest (every 100 ms, the tests' interval,
    // whether a block came or not).
    expect(latest.length).toBeGreaterThanOrEqual(5);
    expect(latest.every((call) => call.params[1] === true)).toBe(true);
  });
});
