import { encodeEventTopics, type Hex, pad, parseTransaction } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { watchMinedPayouts } from "../../api/payouts/watchMinedPayouts.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  claimStatuses,
  createPaidClaims,
  createPayoutHarness,
  type PaidClaim,
  payoutTransfersTo,
} from "../support/payouts.ts";
import { type RpcCall, startRpcProxy } from "../support/rpcProxy.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * What a burst of payouts asks of the node, and in what order. The sender signs and stores the
 * next round while the node takes the one before, yet the node receives every nonce in order;
 * a round the node refuses leaves the one signed behind it for the next tick. The confirmer
 * learns a payout succeeded from the wallet's transfer logs, and follows mined payouts by
 * their blocks' hashes: no receipt per payout, which a node builds from its whole block.
 * Workers are driven tick by tick through the tests' RPC proxy; automine is off.
 */

const BATCH_SIZE = 3;
let chain: TestChain;
let database: TestDatabase;
let chainWithDatabase: ChainWithDatabase | undefined;
let proxy: Awaited<ReturnType<typeof startRpcProxy>>;
let harness: Awaited<ReturnType<typeof createPayoutHarness>>;

beforeAll(async () => {
  ({ chain, database } = chainWithDatabase = await startChainWithDatabase());
  proxy = await startRpcProxy(chain.rpcUrl);
  harness = await createPayoutHarness(chain, database.url, {
    RPC_URL: proxy.url,
    PAYOUT_BATCH_SIZE: String(BATCH_SIZE),
    PAYOUT_CONFIRMATIONS: "2",
  });
  await chain.testClient.setAutomine(false);
});

afterEach(() => {
  proxy.rule = () => ({ kind: "pass" });
});

afterAll(async () => {
  await harness?.stop();
  await proxy?.stop();
  await chainWithDatabase?.stop();
});

function sentNonce(call: RpcCall): number {
  return parseTransaction(call.params[0] as Hex).nonce ?? -1;
}

function callsSince(start: number, method: string): RpcCall[] {
  return proxy.calls.slice(start).filter((call) => call.method === method);
}

async function storedPayouts(claims: PaidClaim[]) {
  return harness.sql<{ claim_id: string; nonce: bigint; status: string }[]>`
    select claim_id, nonce, status from app.payouts
    where claim_id = any(${claims.map((claim) => claim.id)}::text[]) order by nonce`;
}

/** Blocks mined and confirmer ticks until every claim is completed. */
async function completeAll(claims: PaidClaim[]): Promise<void> {
  await waitFor(
    async () => {
      await chain.testClient.mine({ blocks: 1 });
      await harness.confirmer.tick();
      const statuses = await claimStatuses(
        harness.sql,
        claims.map((claim) => claim.id),
      );
      return [...statuses.values()].every((status) => status === "completed");
    },
    { what: "every claim completed", timeoutMs: 30_000, intervalMs: 50 },
  );
}

/** A claim's payout address as a log's topic. */
function recipient(claim: PaidClaim | undefined): Hex {
  if (!claim) throw new Error("no such claim");
  return pad(claim.payoutAddress).toLowerCase() as Hex;
}

async function expectPaidOnce(claims: PaidClaim[]): Promise<void> {
  for (const claim of claims) {
    expect(await payoutTransfersTo(chain, claim.payoutAddress)).toHaveLength(1);
  }
}

describe("the sender's rounds", () => {
  it("signs and stores the next round while the node takes the one before, and sends every nonce in order", async () => {
    const claims = await createPaidClaims(harness.sql, BATCH_SIZE * 3);
    const start = proxy.calls.length;
    const firstNonce = BigInt(
      await chain.publicClient.getTransactionCount({ address: chain.payout.address }),
    );
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The node answers nothing of the first round until the second is stored.
    proxy.rule = (call) =>
      call.method === "eth_sendRawTransaction" && BigInt(sentNonce(call)) < firstNonce + 3n
        ? { kind: "hold", until: held }
        : { kind: "pass" };

    const tick = harness.sender.tick();
    try {
      // The first round has reached the proxy (and waits there) and the second is stored.
      await waitFor(
        async () =>
          callsSince(start, "eth_sendRawTransaction").length === BATCH_SIZE &&
          (await storedPayouts(claims)).length === BATCH_SIZE * 2,
        { what: "the second round stored while the first is with the node" },
      );
      expect(callsSince(start, "eth_sendRawTransaction").map(sentNonce)).toEqual(
        [0, 1, 2].map((offset) => Number(firstNonce) + offset),
      );
    } finally {
      release();
    }
    expect(await tick).toBe(false);

    const stored = await storedPayouts(claims);
    expect(stored.map((payout) => payout.status)).toEqual(Array(9).fill("broadcast"));
    expect(new Set(stored.map((payout) => payout.claim_id)).size).toBe(9);
    const sent = callsSince(start, "eth_sendRawTransaction").map(sentNonce);
    expect(sent).toEqual(stored.map((payout) => Number(payout.nonce)));

    await completeAll(claims);
    await expectPaidOnce(claims);
  });

  it("leaves the round signed behind a refused one for the next tick, which sends both in nonce order", async () => {
    const claims = await createPaidClaims(harness.sql, BATCH_SIZE * 2);
    const firstNonce = BigInt(
      await chain.publicClient.getTransactionCount({ address: chain.payout.address }),
    );
    let refused = 0;
    proxy.rule = (call) => {
      if (call.method !== "eth_sendRawTransaction") return { kind: "pass" };
      if (BigInt(sentNonce(call)) >= firstNonce + 3n) return { kind: "pass" };
      refused += 1;
      return { kind: "error", message: "upstream unavailable" };
    };
    expect(await harness.sender.tick()).toBe(false);
    expect(refused).toBe(BATCH_SIZE);
    // The round behind was signed meanwhile and stays unsent: nothing newer goes first.
    expect((await storedPayouts(claims)).map((payout) => payout.status)).toEqual(
      Array(6).fill("signed"),
    );

    proxy.rule = () => ({ kind: "pass" });
    const start = proxy.calls.length;
    await harness.sender.tick();
    const stored = await storedPayouts(claims);
    expect(stored.map((payout) => payout.status)).toEqual(Array(6).fill("broadcast"));
    expect(callsSince(start, "eth_sendRawTransaction").map(sentNonce)).toEqual(
      stored.map((payout) => Number(payout.nonce)),
    );

    await completeAll(claims);
    await expectPaidOnce(claims);
  });
});

describe("the confirmer's reads", () => {
  it("stores mined payouts from the wallet's transfer logs, with no receipt", async () => {
    const claims = await createPaidClaims(harness.sql, BATCH_SIZE);
    await harness.sender.tick();
    const start = proxy.calls.length;
    await completeAll(claims);
    const logReads = callsSince(start, "eth_getLogs");
    expect(logReads.length).toBeGreaterThan(0);
    expect(callsSince(start, "eth_getTransactionReceipt")).toHaveLength(0);
    // Narrowed to the candidates' recipients: a burst's blocks hold thousands of other payouts.
    const [filter] = (logReads[0]?.params ?? []) as [{ topics: (Hex | Hex[])[] }?];
    expect(filter?.topics[2]).toEqual(
      expect.arrayContaining(claims.map((claim) => pad(claim.payoutAddress).toLowerCase())),
    );
    await expectPaidOnce(claims);
  });

  it("reads the receipts when the node will not answer the logs", async () => {
    const claims = await createPaidClaims(harness.sql, BATCH_SIZE);
    await harness.sender.tick();
    proxy.rule = (call) =>
      call.method === "eth_getLogs"
        ? { kind: "error", message: "query exceeds max results" }
        : { kind: "pass" };
    const start = proxy.calls.length;
    await completeAll(claims);
    expect(callsSince(start, "eth_getTransactionReceipt").length).toBeGreaterThanOrEqual(
      BATCH_SIZE,
    );
    await expectPaidOnce(claims);
  });

  it("takes no log but the token's transfer from the wallet to the payout's recipient", async () => {
    const claims = await createPaidClaims(harness.sql, BATCH_SIZE);
    await harness.sender.tick();
    const payouts = await harness.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.payouts
      where claim_id = any(${claims.map((claim) => claim.id)}::text[]) order by nonce`;
    const [transferTopic] = encodeEventTopics({ abi: usdcAbi, eventName: "Transfer" });
    const stranger = pad(privateKeyToAccount(generatePrivateKey()).address).toLowerCase();
    const wallet = pad(chain.payout.address).toLowerCase();
    const bogusBlockHash = `0x${"ab".repeat(32)}`;
    const otherEventTopic = encodeEventTopics({ abi: usdcAbi, eventName: "AuthorizationUsed" })[0];
    // Logs with the payouts' transaction hashes, each with one thing wrong.
    const wrongLogs = [
      { address: BASE_USDC_ADDRESS, topics: [transferTopic, stranger, recipient(claims[0])] },
      { address: stranger.slice(0, 42), topics: [transferTopic, wallet, recipient(claims[1])] },
      { address: BASE_USDC_ADDRESS, topics: [transferTopic, wallet, stranger] },
      { address: BASE_USDC_ADDRESS, topics: [otherEventTopic, wallet, recipient(claims[0])] },
      { address: BASE_USDC_ADDRESS, topics: [transferTopic, wallet, recipient(claims[1]), wallet] },
      {
        address: BASE_USDC_ADDRESS,
        topics: [transferTopic, wallet, recipient(claims[2])],
        removed: true,
      },
    ].map((log, index) => ({
      data: pad("0x0f4240"),
      blockNumber: "0x1",
      blockHash: bogusBlockHash,
      transactionHash: payouts[index % payouts.length]?.tx_hash,
      transactionIndex: "0x0",
      logIndex: "0x0",
      removed: false,
      ...log,
    }));
    proxy.rule = (call) =>
      call.method === "eth_getLogs" ? { kind: "answer", result: wrongLogs } : { kind: "pass" };
    const start = proxy.calls.length;

    await completeAll(claims);

    expect(callsSince(start, "eth_getLogs").length).toBeGreaterThan(0);
    const stored = await harness.sql<{ block_hash: string }[]>`
      select block_hash from app.payouts
      where claim_id = any(${claims.map((claim) => claim.id)}::text[])`;
    expect(stored.map((payout) => payout.block_hash)).not.toContain(bogusBlockHash);
    await expectPaidOnce(claims);
  });

  it("follows mined payouts by their blocks' hashes, and a payout's receipt only once its block changed", async () => {
    const claims = await createPaidClaims(harness.sql, BATCH_SIZE);
    await harness.sender.tick();
    await completeAll(claims);
    const watch = () =>
      watchMinedPayouts(
        { sql: harness.sql, logger: harness.deps.logger, chainId: harness.config.chain.chainId },
        harness.deps.chain,
        100,
        500,
      );
    const watching = await harness.sql<{ count: bigint }[]>`
      select count(*) from app.payouts where status = 'confirmed' and final_at is null`;
    expect(Number(watching[0]?.count)).toBeGreaterThanOrEqual(BATCH_SIZE);

    const start = proxy.calls.length;
    for (let round = 0; round < 3; round += 1) {
      expect(await watch()).toEqual({ resent: 0, changed: 0, finalized: 0 });
    }
    expect(callsSince(start, "eth_getTransactionReceipt")).toHaveLength(0);
    expect(callsSince(start, "eth_getBlockByNumber").length).toBeGreaterThan(0);

    // A node whose block at a payout's height has another hash (a reorg), or no block there:
    // the receipts of exactly the payouts stored at that height decide, no other.
    const [payout] = await harness.sql<{ block_number: bigint }[]>`
      select block_number from app.payouts
      where claim_id = ${claims[0]?.id ?? ""} and status = 'confirmed'`;
    if (!payout) throw new Error("fixture missing");
    const atHeight = await harness.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.payouts
      where status = 'confirmed' and final_at is null and block_number = ${payout.block_number}`;
    const atThatHeight = (call: RpcCall) =>
      call.method === "eth_getBlockByNumber" &&
      /^0x[0-9a-f]+$/.test(String(call.params[0])) &&
      BigInt(call.params[0] as Hex) === BigInt(payout.block_number);
    for (const answer of [{ hash: `0x${"ab".repeat(32)}` }, null]) {
      proxy.rule = (call) =>
        atThatHeight(call) ? { kind: "answer", result: answer } : { kind: "pass" };
      const before = proxy.calls.length;
      expect(await watch()).toEqual({ resent: 0, changed: 0, finalized: 0 });
      const receiptsRead = callsSince(before, "eth_getTransactionReceipt").map(
        (call) => call.params[0],
      );
      expect(receiptsRead.sort()).toEqual(atHeight.map((row) => row.tx_hash).sort());
    }
  });
});
