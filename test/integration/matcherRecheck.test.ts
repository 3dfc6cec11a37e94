import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { incomingTransfersAfter } from "../../api/chain/incomingTransfers.ts";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { TransferVerifier } from "../../api/chain/verifyTransfers.ts";
import { connectDatabase } from "../../api/db/connect.ts";
import { createLogger } from "../../api/logger.ts";
import { createMatcherWorker } from "../../api/matcher/matcherWorker.ts";
import { createTransferVerifier, matchNextBatch } from "../../api/matcher/matchNextBatch.ts";
import { runWorker, type TickResult } from "../../api/workers/runWorker.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpcProxy.ts";
import { type CreatedClaim, type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The matcher's re-check of a burst: one block's payments fill many batches. The block's
 * transfers to pay_to are read once (its logs) and kept by block hash (reading the block's
 * receipts again for every batch timed out under a burst's load), a kept block that a reorg
 * replaced is read again, and a block whose logs do not come is checked one transaction at a
 * time.
 */

let stack: Stack;
let proxy: RpcProxy;
/** Settled when the file ends: releases the block-receipt calls a test holds. */
let release: () => void = () => {};
const released = new Promise<void>((resolve) => {
  release = resolve;
});

beforeAll(async () => {
  // The service's own workers stay off: these tests drive the matcher by hand.
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A", ROLE: "api" } });
  proxy = await startRpcProxy(stack.chain.rpcUrl);
});

afterAll(async () => {
  release();
  await proxy?.stop();
  await stack?.stop();
});

function matcherDeps(timeoutMs?: number) {
  return {
    sql: stack.service.sql,
    chain: createChainReader(proxy.url, 8453, { timeoutMs }),
    config: stack.service.config,
    logger: createLogger("silent"),
  };
}

/**
 * Claims paid by the given users, every payment in one block, then `blocksAfter` more blocks
 * (3: confirmed, as CONFIRMATIONS is 2 here), and indexed.
 */
async function payInOneBlock(
  payers: number[],
  blocksAfter = 3,
): Promise<{ claims: CreatedClaim[]; hashes: Hex[]; block: bigint }> {
  const claims: CreatedClaim[] = [];
  for (const _ of payers) {
    claims.push(await stack.createClaim(privateKeyToAccount(generatePrivateKey()).address));
  }
  await stack.chain.testClient.setAutomine(false);
  const hashes: Hex[] = [];
  for (const [index, payer] of payers.entries()) {
    const signed = await stack.chain.signedUsdcTransfer(
      stack.chain.user(payer),
      stack.chain.payTo.address,
      atomic((claims[index] as CreatedClaim).amount_due_usdc),
    );
    hashes.push(
      await stack.chain.publicClient.sendRawTransaction({ serializedTransaction: signed }),
    );
  }
  await stack.mine(1);
  await stack.chain.testClient.setAutomine(true);
  const receipt = await stack.chain.publicClient.getTransactionReceipt({
    hash: hashes[0] as Hex,
  });
  for (const hash of hashes) {
    expect((await stack.chain.publicClient.getTransactionReceipt({ hash })).blockNumber).toBe(
      receipt.blockNumber,
    );
  }
  await stack.mine(blocksAfter);
  await stack.untilIndexedHead();
  return { claims, hashes, block: receipt.blockNumber };
}

/** The indexer's rows of the first payment of `paid`, as the matcher reads them. */
async function indexedTransfersOf(paid: { block: bigint; hashes: Hex[] }) {
  return (
    await incomingTransfersAfter(
      stack.service.sql,
      { blockNumber: paid.block - 1n, logIndex: 2_147_483_647 },
      paid.block,
      10,
    )
  ).filter((transfer) => transfer.txHash === paid.hashes[0]);
}

/** eth_getLogs calls over exactly this block (the matcher's re-check asks one height). */
function logReadsOf(block: bigint): number {
  return proxy.calls.filter((call) => {
    if (call.method !== "eth_getLogs") return false;
    const filter = call.params[0] as { fromBlock?: string; toBlock?: string };
    return BigInt(filter.fromBlock ?? -1) === block && BigInt(filter.toBlock ?? -1) === block;
  }).length;
}

/** eth_getBlockByNumber calls for exactly this block. */
function headerReadsOf(block: bigint): number {
  return proxy.calls.filter(
    (call) => call.method === "eth_getBlockByNumber" && BigInt(call.params[0] as string) === block,
  ).length;
}

async function matchEverything(
  deps: ReturnType<typeof matcherDeps>,
  options: Parameters<typeof matchNextBatch>[1],
): Promise<number> {
  let matched = 0;
  for (let round = 0; round < 50; round += 1) {
    const batch = await matchNextBatch(deps, options);
    matched += batch.matched;
    if (!batch.more && batch.processed === 0) return matched;
  }
  throw new Error("the matcher did not finish in 50 batches");
}

describe("the matcher's re-check of a burst", () => {
  it("reads a block's transfers once for all the batches it fills", async () => {
    const paid = await payInOneBlock([0, 1, 2, 3]);
    const deps = matcherDeps();
    const verifier = createTransferVerifier(deps);

    const matched = await matchEverything(deps, { batchSize: 1, verifier });

    expect(matched).toBe(4);
    for (const claim of paid.claims) {
      expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("paid");
    }
    // Four batches in the block: one read of its transfers, headers for the rest.
    expect(logReadsOf(paid.block)).toBe(1);
    expect(proxy.count("eth_getBlockReceipts")).toBe(0);
  });

  it("checks a batch one transaction at a time when its block's transfers do not come", async () => {
    const paid = await payInOneBlock([4, 5]);
    proxy.rule = (call) =>
      call.method === "eth_getLogs" ? { kind: "hold", until: released } : { kind: "pass" };
    try {
      const receiptsBefore = proxy.count("eth_getTransactionReceipt");
      const matched = await matchEverything(matcherDeps(300), {});

      expect(matched).toBe(2);
      for (const claim of paid.claims) {
        expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("paid");
      }
      expect(logReadsOf(paid.block)).toBeGreaterThan(0);
      expect(proxy.count("eth_getTransactionReceipt") - receiptsBefore).toBeGreaterThanOrEqual(2);
    } finally {
      proxy.rule = () => ({ kind: "pass" });
    }
  });

  it("reads receipts when a block's logs come back short without an error, and health says so", async () => {
    const paid = await payInOneBlock([0, 1]);
    // A provider that truncates eth_getLogs silently: the block's last transfer is missing.
    proxy.rule = (call) => {
      if (call.method !== "eth_getLogs") return { kind: "pass" };
      const filter = call.params[0] as { fromBlock?: string };
      return BigInt(filter.fromBlock ?? -1) === paid.block
        ? { kind: "rewrite", change: (logs) => (logs as unknown[]).slice(0, -1) }
        : { kind: "pass" };
    };
    try {
      const matched = await matchEverything(matcherDeps(), { verifier: undefined });

      expect(matched).toBe(2);
      for (const claim of paid.claims) {
        expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("paid");
      }
      expect(logReadsOf(paid.block)).toBeGreaterThan(0);
      const health = await stack.api("/api/health");
      expect(health.body.reasons).toContain("rpc_logs_incomplete");
    } finally {
      proxy.rule = () => ({ kind: "pass" });
    }
  });

  it("reads a block's transfers while it awaits confirmation, and only its header once confirmed", async () => {
    const paid = await payInOneBlock([0, 1], 0);
    const deps = matcherDeps();
    const verifier = createTransferVerifier(deps);

    const early = await matchNextBatch(deps, { verifier });

    expect(early).toEqual({ processed: 0, matched: 0, more: false });
    expect(logReadsOf(paid.block)).toBe(1);
    for (const claim of paid.claims) {
      expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe(
        "awaiting_payment",
      );
    }

    await stack.mine(2);
    await stack.untilIndexedHead();
    const headersBefore = headerReadsOf(paid.block);
    const matched = await matchEverything(deps, { verifier });

    expect(matched).toBe(2);
    for (const claim of paid.claims) {
      expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("paid");
    }
    // At confirmation: the block's header again, its transfers not.
    expect(logReadsOf(paid.block)).toBe(1);
    expect(headerReadsOf(paid.block)).toBeGreaterThan(headersBefore);
  });

  it("does not read ahead again at once a block whose transfers did not come, and matches it at confirmation", async () => {
    const paid = await payInOneBlock([3, 4], 0);
    const deps = matcherDeps(300);
    const verifier = createTransferVerifier(deps);
    proxy.rule = (call) =>
      call.method === "eth_getLogs" ? { kind: "error", message: "overloaded" } : { kind: "pass" };
    try {
      await matchNextBatch(deps, { verifier });
      const tried = logReadsOf(paid.block);
      expect(tried).toBeGreaterThan(0);

      await matchNextBatch(deps, { verifier });

      expect(logReadsOf(paid.block)).toBe(tried);
    } finally {
      proxy.rule = () => ({ kind: "pass" });
    }
    await stack.mine(2);
    await stack.untilIndexedHead();
    expect(await matchEverything(deps, { verifier })).toBe(2);
    for (const claim of paid.claims) {
      expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("paid");
    }
  });

  it("reads a block read ahead again once a reorg has replaced it before its confirmation", async () => {
    const paid = await payInOneBlock([2], 0);
    const transfers = await indexedTransfersOf(paid);
    expect(transfers).toHaveLength(1);
    const verifier = createTransferVerifier(matcherDeps());
    await verifier.readAhead(paid.block);
    expect(logReadsOf(paid.block)).toBe(1);

    // The payment's block is replaced by an empty one before it is confirmed.
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [1, []] as never,
    });

    expect(await verifier.verifiedPrefix(transfers)).toBe(0);
    expect(logReadsOf(paid.block)).toBe(2);
  });

  it("reads a kept block again once a reorg has replaced it", async () => {
    const paid = await payInOneBlock([6]);
    const transfers = await indexedTransfersOf(paid);
    expect(transfers).toHaveLength(1);
    const { config } = stack.service;
    const verifier = new TransferVerifier(
      createChainReader(proxy.url, 8453),
      config.chain.usdcAddress,
      config.chain.payTo,
    );
    expect(await verifier.verifiedPrefix(transfers)).toBe(1);

    // The payment's block and the ones after it are replaced by empty blocks.
    const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [Number(head - paid.block + 1n), []] as never,
    });

    expect(await verifier.verifiedPrefix(transfers)).toBe(0);
  });
});

describe("the matcher worker's wake-up", () => {
  it("looks again as soon as the indexer has a new block, not after its interval", async () => {
    const deps = {
      ...matcherDeps(),
      config: { ...stack.service.config, matcher: { intervalMs: 600_000 } },
    };
    const matcher = createMatcherWorker(deps);
    let lastTick: TickResult | undefined;
    const loop = runWorker(
      {
        lockSession: (onClose) =>
          connectDatabase(stack.database.url, { max: 1, session: { onClose } }),
        notifications: stack.service.sql,
      },
      {
        ...matcher,
        tick: async (lock) => {
          lastTick = undefined;
          lastTick = await matcher.tick(lock);
          return lastTick;
        },
      },
      createLogger("silent"),
    );
    try {
      expect(await loop.firstTick).toBe("holding");
      // Idle: what earlier tests left is matched, and the next look is 10 minutes away.
      await waitFor(() => lastTick === false, { what: "the matcher to be idle" });

      const paid = await payInOneBlock([1]);
      const claim = await stack.untilClaimStatus((paid.claims[0] as CreatedClaim).claim_id, "paid");
      expect(claim.status).toBe("paid");
    } finally {
      await loop.stop();
    }
  });
});
