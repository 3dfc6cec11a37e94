import { randomBytes } from "node:crypto";
import {
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  maxUint256,
  parseTransaction,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publicChainReads } from "../../api/chain/publicChainReads.ts";

import { createPayoutWorkers } from "../../api/payouts/payoutWorkers.ts";
import { signReplacement } from "../../api/payouts/signPayoutTransaction.ts";
import { newWatchState, watchMinedPayouts } from "../../api/payouts/watchMinedPayouts.ts";
import { parseReceiptMessage } from "../../api/receipts/receiptMessage.ts";
import { verifyReceipt } from "../../api/receipts/verifyReceipt.ts";
import type { Worker } from "../../api/workers/runWorker.ts";
import { testUsdcArtifact } from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole } from "../../scripts/devnet/accounts.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import {
  callDevnetToken,
  claimStatuses,
  createPaidClaims,
  createPayoutHarness,
  type PaidClaim,
  payoutTransfersTo,
} from "../support/payouts.ts";
import { type RpcFault, startRpcProxy } from "../support/rpcProxy.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Payouts whose outcome a reorg changes, and reorgs deeper than PAYOUT_CONFIRMATIONS
 * (docs/operating.md#payout-reorgs): a receipt never stands for a payout that moved nothing, a
 * claim is paid once and only once, and the wallet's nonces never stall for good.
 * The payout workers are driven tick by tick; automine is off, blocks and reorgs are the test's.
 */

const PAYOUT_CONFIRMATIONS = 2;
const settings = {
  PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS),
  PAYOUT_NONCE_GAP_SECONDS: "1",
  PAYOUT_FOREIGN_NONCE_GRACE_SECONDS: "0",
};
let chain: TestChain;
let chainWithDatabase: ChainWithDatabase | undefined;
let harness: Awaited<ReturnType<typeof createPayoutHarness>>;

beforeAll(async () => {
  ({ chain } = chainWithDatabase = await startChainWithDatabase());
  harness = await createPayoutHarness(chain, chainWithDatabase.database.url, settings);
  await chain.testClient.setAutomine(false);
});

afterAll(async () => {
  await harness?.stop();
  await chainWithDatabase?.stop();
});

type Harness = typeof harness;

async function withAutomine<T>(work: () => Promise<T>): Promise<T> {
  await chain.testClient.setAutomine(true);
  try {
    return await work();
  } finally {
    await chain.testClient.setAutomine(false);
  }
}

async function statusOf(claim: PaidClaim) {
  return (await claimStatuses(harness.sql, [claim.id])).get(claim.id);
}

async function payoutsOf(claim: PaidClaim) {
  return harness.sql<
    { nonce: bigint; status: string; tx_hash: Hex; raw_tx: Hex; block_number: bigint | null }[]
  >`select nonce, status, tx_hash, raw_tx, block_number from app.payouts
    where claim_id = ${claim.id} order by nonce`;
}

async function receiptOf(claim: PaidClaim) {
  const [row] = await harness.sql<{ message: string; signature: Hex }[]>`
    select message, signature from app.receipts where claim_id = ${claim.id}`;
  return row;
}

function verify(receipt: { message: string; signature: Hex }) {
  // Uncached: each verdict must see the chain as it is now.
  const reads = publicChainReads(harness.deps.chain, { cacheMs: 0, maxConcurrent: 16 });
  return verifyReceipt({ sql: harness.sql, reads }, harness.config.receipts.signer, receipt);
}

/** Worker rounds, a block mined after each, until `done`. */
function roundsUntil(
  done: () => Promise<boolean>,
  what: string,
  workers: Harness = harness,
): Promise<true> {
  return waitFor(
    async () => {
      await workers.round();
      await chain.testClient.mine({ blocks: 1 });
      await workers.confirmer.tick();
      return (await done()) || undefined;
    },
    { what, timeoutMs: 30_000, intervalMs: 100 },
  );
}

/** Confirmer rounds (no block mined) until `done`. */
function confirmerUntil(done: () => Promise<boolean>, what: string): Promise<true> {
  return waitFor(
    async () => {
      await harness.confirmer.tick();
      return (await done()) || undefined;
    },
    { what, timeoutMs: 20_000, intervalMs: 100 },
  );
}

/** A claim paid, its payout mined in a block of its own, the claim completed. */
async function completedClaim(payoutAddress?: `0x${string}`, email?: string) {
  const [claim] = await createPaidClaims(harness.sql, 1, {
    ...(payoutAddress ? { payoutAddresses: [payoutAddress] } : {}),
    ...(email ? { email: () => email } : {}),
  });
  if (!claim) throw new Error("fixture missing");
  await harness.sender.tick();
  await chain.testClient.mine({ blocks: 1 });
  await harness.confirmer.tick();
  expect(await statusOf(claim)).toBe("completed");
  const [payout] = await payoutsOf(claim);
  const receipt = await receiptOf(claim);
  if (!payout || !receipt) throw new Error("no payout or receipt");
  return { claim, payout, receipt };
}

/** Replaces the blocks from `block` on with one block holding `transactions`, in order. */
async function reorgFrom(block: bigint, transactions: Hex[] = []) {
  const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
  await chain.testClient.request({
    method: "anvil_reorg" as never,
    params: [Number(head - block + 1n), transactions.map((raw) => [raw, 0])] as never,
  });
}

/** A transaction from one of the devnet's accounts, signed and not sent, tipping well. */
async function signedCall(
  from: Parameters<TestChain["walletFor"]>[0],
  to: `0x${string}`,
  data: Hex,
): Promise<Hex> {
  const wallet = chain.walletFor(from);
  const request = await wallet.prepareTransactionRequest({
    to,
    data,
    gas: 100_000n,
    maxFeePerGas: 100_000_000_000n,
    maxPriorityFeePerGas: 50_000_000_000n,
  });
  return wallet.signTransaction(request);
}

function signedBlacklist(address: `0x${string}`): Promise<Hex> {
  return signedCall(
    accountWithRole(chain.accounts, "deployer"),
    BASE_USDC_ADDRESS,
    encodeFunctionData({ abi: testUsdcArtifact.abi, functionName: "blacklist", args: [address] }),
  );
}

function latestNonce(): Promise<bigint> {
  return chain.publicClient
    .getTransactionCount({ address: chain.payout.address, blockTag: "latest" })
    .then(BigInt);
}

/** Gone from the node's pool too, should the reorg have put it back there. */
async function forget(hashes: Hex[]) {
  for (const hash of hashes) await chain.testClient.dropTransaction({ hash });
}

/**
 * Final, as the watcher makes a successful payout once the indexer holds it too: this harness
 * runs no indexer, so the watcher never would.
 */
async function markFinal(nonce: bigint) {
  await chain.testClient.mine({ blocks: PAYOUT_CONFIRMATIONS + 1 });
  await harness.sql`update app.payouts set final_at = now() where nonce = ${nonce}`;
}

/** An allowance on the payout wallet, given long ago to someone who can drain it. */
async function drawerOnPayoutWallet() {
  const drawer = chain.user(0);
  await withAutomine(() =>
    chain.walletFor(chain.payout).writeContract({
      address: BASE_USDC_ADDRESS,
      abi: erc20Abi,
      functionName: "approve",
      args: [drawer.address, maxUint256],
      gas: 100_000n,
    }),
  );
  return {
    /** Takes `amount` out of the payout wallet, tipping more than any payout. */
    drain: (amount: bigint) =>
      signedCall(
        drawer,
        BASE_USDC_ADDRESS,
        encodeFunctionData({
          abi: erc20Abi,
          functionName: "transferFrom",
          args: [chain.payout.address, drawer.address, amount],
        }),
      ),
  };
}

function minedIn(hash: Hex): Promise<bigint> {
  return chain.publicClient.getTransactionReceipt({ hash }).then((receipt) => receipt.blockNumber);
}

describe("a payout a reorg mines again with another outcome", () => {
  it("re-mined as reverted (a top-up reordered after it): receipt withdrawn, claim paid by a new payout once", async () => {
    const drawer = await drawerOnPayoutWallet();
    const { claim, payout, receipt } = await completedClaim();
    expect((await verify(receipt)).reason).toBe("ok");

    // The new branch orders the drain before the payout: the same bytes now revert.
    const before = (await chain.usdcBalance(chain.payout.address)) + 1n * USDC;
    const drain = await drawer.drain(before);
    await reorgFrom(await minedIn(payout.tx_hash), [drain, payout.raw_tx]);
    expect((await chain.publicClient.getTransactionReceipt({ hash: payout.tx_hash })).status).toBe(
      "reverted",
    );

    await confirmerUntil(async () => (await statusOf(claim)) === "paying", "the completion undone");
    expect(await receiptOf(claim)).toBeUndefined();
    expect((await payoutsOf(claim)).map((row) => row.status)).toEqual(["reverted"]);
    const verdict = await verify(receipt);
    expect(verdict).toMatchObject({ genuine: true, current: false, reason: "payout_undone" });
    expect(verdict.chain?.payout.state).toBe("reverted");

    // Not final yet: nothing new is signed, even with the wallet funded again.
    await withAutomine(() =>
      callDevnetToken(chain, { functionName: "mint", args: [chain.payout.address, 100n * USDC] }),
    );
    await harness.sender.tick();
    expect(await payoutsOf(claim)).toHaveLength(1);

    await roundsUntil(async () => (await statusOf(claim)) === "completed", "a new payout");
    const payouts = await payoutsOf(claim);
    expect(payouts.map((row) => row.status)).toEqual(["reverted", "confirmed"]);
    expect(payouts[1]?.nonce).toBeGreaterThan(payout.nonce);
    const transfers = await payoutTransfersTo(chain, claim.payoutAddress);
    expect(transfers.map((transfer) => transfer.txHash)).toEqual([payouts[1]?.tx_hash]);
    const renewed = await receiptOf(claim);
    if (!renewed) throw new Error("no new receipt");
    expect(parseReceiptMessage(renewed.message)?.["Payout tx"]).toBe(payouts[1]?.tx_hash);
    expect((await verify(renewed)).reason).toBe("ok");
    expect((await verify(receipt)).reason).toBe("payout_undone");
  });

  it("stores the revert and undoes the completion together: a failure between them leaves neither, and the next round does both", async () => {
    const drawer = await drawerOnPayoutWallet();
    const { claim, payout, receipt } = await completedClaim();
    const drain = await drawer.drain((await chain.usdcBalance(chain.payout.address)) + 1n * USDC);
    await reorgFrom(await minedIn(payout.tx_hash), [drain, payout.raw_tx]);
    // A crash, as good as: the receipt cannot be withdrawn.
    await harness.sql.unsafe(`
      create function app.refuse_withdrawal() returns trigger language plpgsql as $$
      begin raise exception 'withdrawal refused by the test'; end $$;
      create trigger refuse_withdrawal before insert on app.withdrawn_receipts
        for each row execute function app.refuse_withdrawal();`);
    try {
      await confirmerUntil(
        async () => (await payoutsOf(claim))[0]?.status === "broadcast",
        "the changed outcome handed to the confirmer",
      );
      for (let round = 0; round < 3; round += 1) await harness.confirmer.tick();
      expect(await statusOf(claim)).toBe("completed");
      expect((await payoutsOf(claim))[0]?.status).toBe("broadcast");
      expect((await receiptOf(claim))?.message).toBe(receipt.message);
    } finally {
      await harness.sql.unsafe(`
        drop trigger refuse_withdrawal on app.withdrawn_receipts;
        drop function app.refuse_withdrawal();`);
    }
    await harness.confirmer.tick();
    expect(await statusOf(claim)).toBe("paying");
    expect((await payoutsOf(claim)).map((row) => row.status)).toEqual(["reverted"]);
    expect((await verify(receipt)).reason).toBe("payout_undone");
    await withAutomine(() =>
      callDevnetToken(chain, { functionName: "mint", args: [chain.payout.address, 100n * USDC] }),
    );
    await roundsUntil(async () => (await statusOf(claim)) === "completed", "a new payout");
    expect(await payoutTransfersTo(chain, claim.payoutAddress)).toHaveLength(1);
  });

  it("taken away, sent again byte for byte and then reverted (recipient blacklisted meanwhile): receipt withdrawn, claim failed", async () => {
    const recipient = getAddress(`0x${randomBytes(20).toString("hex")}`);
    const { claim, payout, receipt } = await completedClaim(recipient);

    await reorgFrom(await minedIn(payout.tx_hash));
    // The watcher sends the same bytes again; the blacklisting, tipping more, is mined first.
    await confirmerUntil(
      async () => (await payoutsOf(claim))[0]?.status === "broadcast",
      "the payout seen gone and sent again",
    );
    await chain.publicClient.sendRawTransaction({
      serializedTransaction: await signedBlacklist(recipient),
    });
    await harness.confirmer.tick();
    await chain.testClient.mine({ blocks: 1 });
    expect((await chain.publicClient.getTransactionReceipt({ hash: payout.tx_hash })).status).toBe(
      "reverted",
    );

    await confirmerUntil(async () => (await statusOf(claim)) === "failed", "the claim failed");
    expect(await receiptOf(claim)).toBeUndefined();
    expect((await verify(receipt)).reason).toBe("payout_undone");
    expect(await payoutTransfersTo(chain, recipient)).toHaveLength(0);
  });

  it("reverted for a blacklisted recipient, then mined successfully in the new branch: the claim completes", async () => {
    const recipient = getAddress(`0x${randomBytes(20).toString("hex")}`);
    await chain.publicClient.sendRawTransaction({
      serializedTransaction: await signedBlacklist(recipient),
    });
    await chain.testClient.mine({ blocks: 1 });
    const blacklistedIn = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
    const [claim] = await createPaidClaims(harness.sql, 1, { payoutAddresses: [recipient] });
    if (!claim) throw new Error("fixture missing");
    await harness.sender.tick();
    await chain.testClient.mine({ blocks: 1 });
    await harness.confirmer.tick();
    expect(await statusOf(claim)).toBe("failed");
    const [payout] = await payoutsOf(claim);
    if (!payout) throw new Error("no payout");

    // The new branch never saw the blacklisting: the same payout succeeds there.
    await reorgFrom(blacklistedIn, [payout.raw_tx]);
    await confirmerUntil(
      async () => (await statusOf(claim)) === "completed",
      "the claim completed",
    );
    const receipt = await receiptOf(claim);
    expect(parseReceiptMessage(receipt?.message ?? "")?.["Payout tx"]).toBe(payout.tx_hash);
    expect(await payoutTransfersTo(chain, recipient)).toHaveLength(1);
  });

  it("its replacement mined instead of the attempt the receipt names: the receipt is signed again naming it", async () => {
    const { claim, payout, receipt } = await completedClaim(undefined, "holder@example.com");
    // A replacement signed while the first attempt waited, still held by some node.
    const account = privateKeyToAccount(harness.config.payout.privateKey);
    const fees = parseTransaction(payout.raw_tx);
    const replacement = await signReplacement(account, payout.raw_tx, {
      maxFeePerGas: (fees.maxFeePerGas ?? 0n) * 2n,
      maxPriorityFeePerGas: (fees.maxPriorityFeePerGas ?? 0n) * 2n,
    });
    await harness.sql`
      insert into app.payout_attempts
        (tx_hash, claim_id, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas)
      values (${replacement.txHash}, ${claim.id}, ${payout.nonce}, ${replacement.rawTx},
        ${((fees.maxFeePerGas ?? 0n) * 2n).toString()},
        ${((fees.maxPriorityFeePerGas ?? 0n) * 2n).toString()})`;

    await reorgFrom(await minedIn(payout.tx_hash), [replacement.rawTx]);
    await confirmerUntil(
      async () =>
        parseReceiptMessage((await receiptOf(claim))?.message ?? "")?.["Payout tx"] ===
        replacement.txHash,
      "the receipt naming the replacement",
    );
    expect(await statusOf(claim)).toBe("completed");
    const [row] = await payoutsOf(claim);
    expect(row).toMatchObject({ status: "confirmed", tx_hash: replacement.txHash });
    expect((await verify(receipt)).reason).toBe("superseded_or_altered");
    const renewed = await receiptOf(claim);
    if (!renewed) throw new Error("no receipt");
    expect((await verify(renewed)).reason).toBe("ok");
    const transfers = await payoutTransfersTo(chain, claim.payoutAddress);
    expect(transfers.map((transfer) => transfer.txHash)).toEqual([replacement.txHash]);
    // The holder is mailed the receipt again: the one mailed first names a payout not mined.
    const mails = await harness.sql<{ idempotency_key: string }[]>`
      select idempotency_key from app.outbox where claim_id = ${claim.id} order by id`;
    expect(mails.map((mail) => mail.idempotency_key)).toEqual([
      `receipt_mail:${claim.id}`,
      `receipt_mail:${claim.id}:${replacement.txHash.toLowerCase()}`,
    ]);
  });
});

describe("a reorg deeper than PAYOUT_CONFIRMATIONS", () => {
  it("sends a final payout it took away again, byte for byte, and new payouts go on", async () => {
    const { claim: first, payout, receipt } = await completedClaim();
    await markFinal(payout.nonce);
    await reorgFrom(await minedIn(payout.tx_hash));
    await forget([payout.tx_hash]);
    expect(await latestNonce()).toBeLessThanOrEqual(payout.nonce);

    const [second] = await createPaidClaims(harness.sql, 1);
    if (!second) throw new Error("fixture missing");
    await roundsUntil(
      async () => (await statusOf(second)) === "completed",
      "the dropped payout mined again and the next claim paid",
    );
    const [again] = await payoutsOf(first);
    expect(again).toMatchObject({ status: "confirmed", tx_hash: payout.tx_hash });
    expect(await statusOf(first)).toBe("completed");
    expect((await receiptOf(first))?.message).toBe(receipt.message);
    expect(await payoutTransfersTo(chain, first.payoutAddress)).toHaveLength(1);
    expect(await payoutTransfersTo(chain, second.payoutAddress)).toHaveLength(1);
  });

  it("revives and sends nothing for a node that answers a low nonce, or lags behind the stored blocks", async () => {
    // One payout final, one not: the reviver and the watcher each have one to get wrong.
    const { payout } = await completedClaim();
    await markFinal(payout.nonce);
    await completedClaim();
    const proxy = await startRpcProxy(chain.rpcUrl);
    const misled = await createPayoutHarness(chain, chainWithDatabase?.database.url ?? "", {
      ...settings,
      PAYOUT_RPC_URL: proxy.url,
    });
    const stored = () =>
      harness.sql`select nonce, status, block_hash from app.payouts order by nonce`;
    const before = await stored();
    expect(before.filter((row) => row.status === "confirmed").length).toBeGreaterThanOrEqual(2);
    const lowNonce: RpcFault = { kind: "rewrite", change: () => "0x0" };
    /** A round of a confirmer just started: it looks at the mined payouts at once. */
    const watchRound = async () => {
      const [, confirmer] = createPayoutWorkers(misled.deps) as [Worker, Worker];
      await confirmer.tick();
    };
    try {
      // A node (lagging or lying) whose nonce says none of our payouts was ever mined; its
      // blocks are the chain's, so every stored block is still there.
      proxy.rule = (call) =>
        call.method === "eth_getTransactionCount" ? lowNonce : { kind: "pass" };
      await watchRound();
      // A node far behind: its head below every stored block, which it does not have yet.
      proxy.rule = (call) => {
        if (call.method === "eth_getTransactionCount") return lowNonce;
        if (call.method === "eth_blockNumber") return { kind: "answer", result: "0x1" };
        if (call.method === "eth_getBlockByNumber" || call.method === "eth_getTransactionReceipt")
          return { kind: "answer", result: null };
        return { kind: "pass" };
      };
      await watchRound();
      // Behind a load balancer: the head from an up-to-date backend, the blocks and receipts
      // from one behind it (no block at the stored heights, no receipts), over two watch rounds
      // of one confirmer (a verdict must hold in two rounds in a row).
      proxy.rule = (call) => {
        if (call.method === "eth_getTransactionCount") return lowNonce;
        if (call.method === "eth_getBlockByNumber" || call.method === "eth_getTransactionReceipt")
          return { kind: "answer", result: null };
        return { kind: "pass" };
      };
      const [, confirmer] = createPayoutWorkers(misled.deps) as [Worker, Worker];
      await confirmer.tick();
      const firstRound = Date.now();
      // The watch looks at mined payouts once a second: the next tick is a second round.
      await waitFor(() => Date.now() - firstRound > 1_100, { what: "the next watch round" });
      await confirmer.tick();
      expect(proxy.count("eth_getBlockByNumber")).toBeGreaterThan(0);
      expect(proxy.count("eth_sendRawTransaction")).toBe(0);
      expect(await stored()).toEqual(before);
    } finally {
      await misled.stop();
      await proxy.stop();
    }
  });

  it("never sends again a reverted payout a later one replaced: a filler takes its nonce", async () => {
    const drawer = await drawerOnPayoutWallet();
    const [claim] = await createPaidClaims(harness.sql, 1);
    if (!claim) throw new Error("fixture missing");
    await harness.sender.tick();
    const [reverted] = await payoutsOf(claim);
    if (!reverted) throw new Error("no payout");
    const revertedIn = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
    await chain.publicClient.sendRawTransaction({
      serializedTransaction: await drawer.drain(await chain.usdcBalance(chain.payout.address)),
    });
    await chain.testClient.mine({ blocks: 1 });
    await harness.confirmer.tick();
    expect((await payoutsOf(claim)).map((row) => row.status)).toEqual(["reverted"]);
    await withAutomine(() =>
      callDevnetToken(chain, { functionName: "mint", args: [chain.payout.address, 100n * USDC] }),
    );
    await roundsUntil(async () => (await statusOf(claim)) === "completed", "the new payout");
    const [, paid] = await payoutsOf(claim);
    if (!paid) throw new Error("no second payout");
    await markFinal(paid.nonce);

    // Both taken away, and the drain with them: the reverted bytes would now succeed.
    await reorgFrom(revertedIn + 1n);
    await forget([reverted.tx_hash, paid.tx_hash]);
    expect(await latestNonce()).toBeLessThanOrEqual(reverted.nonce);
    await roundsUntil(
      async () =>
        (await latestNonce()) > paid.nonce && (await payoutsOf(claim))[1]?.status === "confirmed",
      "a filler at the reverted payout's nonce and the new payout mined again",
    );
    const [filler] = await harness.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.nonce_fillers where nonce = ${reverted.nonce}`;
    if (!filler) throw new Error("no filler");
    const filled = await chain.publicClient.getTransaction({ hash: filler.tx_hash });
    expect(filled).toMatchObject({ to: chain.payout.address.toLowerCase(), value: 0n });
    expect(BigInt(filled.maxFeePerGas ?? 0n)).toBeGreaterThan(
      parseTransaction(reverted.raw_tx).maxFeePerGas ?? 0n,
    );
    await expect(
      chain.publicClient.getTransactionReceipt({ hash: reverted.tx_hash }),
    ).rejects.toThrow();
    const transfers = await payoutTransfersTo(chain, claim.payoutAddress);
    expect(transfers.map((transfer) => transfer.txHash)).toEqual([paid.tx_hash]);
  });

  it("fills the nonce of a payout an operator re-issued, once a reorg takes away the transaction that had used it", async () => {
    const [claim] = await createPaidClaims(harness.sql, 1);
    if (!claim) throw new Error("fixture missing");
    await harness.sender.tick();
    const [first] = await payoutsOf(claim);
    if (!first) throw new Error("no payout");
    // Another process with the key takes the payout's nonce, tipping more.
    const foreign = await chain.walletFor(chain.payout).sendTransaction({
      to: accountWithRole(chain.accounts, "deployer").address,
      value: 1n,
      nonce: Number(first.nonce),
      gas: 21_000n,
      maxFeePerGas: 100_000_000_000n,
      maxPriorityFeePerGas: 50_000_000_000n,
    });
    await chain.testClient.mine({ blocks: 1 });
    const foreignIn = await minedIn(foreign);
    // As the operator's re-issue leaves it (pay-and-earn reissue-payout, tested in payoutMoneyPaths).
    await harness.sql`
      update app.payouts set status = 'abandoned', final_at = now() where nonce = ${first.nonce}`;
    await roundsUntil(async () => (await statusOf(claim)) === "completed", "the re-issued payout");
    const [, paid] = await payoutsOf(claim);
    if (!paid) throw new Error("no second payout");
    await markFinal(paid.nonce);

    // The foreign transaction goes: the abandoned payout's bytes could be mined there now.
    await reorgFrom(foreignIn);
    await forget([foreign, first.tx_hash, paid.tx_hash]);
    expect(await latestNonce()).toBeLessThanOrEqual(first.nonce);
    await roundsUntil(
      async () =>
        (await latestNonce()) > paid.nonce && (await payoutsOf(claim))[1]?.status === "confirmed",
      "a filler at the abandoned payout's nonce and the new payout mined again",
    );
    const [filler] = await harness.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.nonce_fillers where nonce = ${first.nonce}`;
    if (!filler) throw new Error("no filler");
    expect((await chain.publicClient.getTransaction({ hash: filler.tx_hash })).value).toBe(0n);
    await expect(
      chain.publicClient.getTransactionReceipt({ hash: first.tx_hash }),
    ).rejects.toThrow();
    const transfers = await payoutTransfersTo(chain, claim.payoutAddress);
    expect(transfers.map((transfer) => transfer.txHash)).toEqual([paid.tx_hash]);
  });

  it("watches every mined payout, however many never become final", async () => {
    // In this harness no successful payout becomes final (no indexer): those of the tests
    // above are just such rows, and they have the lowest nonces.
    const { claim, payout } = await completedClaim();
    const [{ waiting } = { waiting: 0 }] = await harness.sql<{ waiting: number }[]>`
      select count(*)::int as waiting from app.payouts
      where status in ('confirmed', 'reverted') and final_at is null`;
    const window = 2;
    expect(waiting).toBeGreaterThan(window);
    await reorgFrom(await minedIn(payout.tx_hash));
    await forget([payout.tx_hash]);

    const state = newWatchState();
    let resent = 0;
    for (let round = 0; round <= waiting / window && resent === 0; round += 1) {
      const watched = await watchMinedPayouts(
        { sql: harness.sql, logger: harness.deps.logger, chainId: harness.config.chain.chainId },
        harness.deps.chain,
        PAYOUT_CONFIRMATIONS,
        window,
        state,
      );
      resent += watched.resent;
    }
    expect(resent).toBe(1);
    expect((await payoutsOf(claim))[0]?.status).toBe("broadcast");
    await roundsUntil(
      async () => (await payoutsOf(claim))[0]?.status === "confirmed",
      "the payout mined again",
    );
    expect(await payoutTransfersTo(chain, claim.payoutAddress)).toHaveLength(1);
  });
});

describe("a nonce filler priced out by a risen base fee", () => {
  it("is signed again at a higher fee, mined, and the payouts behind it complete", async () => {
    const repricing = await createPayoutHarness(chain, chainWithDatabase?.database.url ?? "", {
      ...settings,
      PAYOUT_REPLACE_SECONDS: "1",
      PAYOUT_REBROADCAST_SECONDS: "1",
      PAYOUT_MAX_FEE_GWEI: "1000",
    });
    const startFee = (await chain.publicClient.getBlock()).baseFeePerGas ?? 1_000_000_000n;
    try {
      // Another process with the key sends a transaction that never makes it.
      const gap = BigInt(
        await chain.publicClient.getTransactionCount({
          address: chain.payout.address,
          blockTag: "pending",
        }),
      );
      const foreign = await chain.walletFor(chain.payout).sendTransaction({
        to: accountWithRole(chain.accounts, "deployer").address,
        value: 1n,
        nonce: Number(gap),
        gas: 21_000n,
        maxFeePerGas: 10_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
      });
      const [claim] = await createPaidClaims(harness.sql, 1);
      if (!claim) throw new Error("fixture missing");
      await repricing.sender.tick();
      expect((await payoutsOf(claim))[0]?.nonce).toBe(gap + 1n);
      await forget([foreign]);
      const first = await waitFor(
        async () => {
          await repricing.sender.tick();
          const [row] = await harness.sql<{ tx_hash: Hex; raw_tx: Hex }[]>`
            select tx_hash, raw_tx from app.nonce_fillers where nonce = ${gap}`;
          return row;
        },
        { what: "the gap filled" },
      );

      // The base fee rises far past what the filler offers, and stays there.
      const raised = (parseTransaction(first.raw_tx).maxFeePerGas ?? 0n) * 20n;
      await waitFor(
        async () => {
          await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: raised });
          await repricing.round();
          await chain.testClient.mine({ blocks: 1 });
          await repricing.confirmer.tick();
          return (await statusOf(claim)) === "completed" || undefined;
        },
        { what: "the filler re-priced and the payout behind it completed", timeoutMs: 30_000 },
      );
      const [now] = await harness.sql<{ tx_hash: Hex }[]>`
        select tx_hash from app.nonce_fillers where nonce = ${gap}`;
      expect(now?.tx_hash).not.toBe(first.tx_hash);
      const mined = await chain.publicClient.getTransaction({ hash: now?.tx_hash as Hex });
      expect(mined.nonce).toBe(Number(gap));
      expect(mined.maxFeePerGas).toBeGreaterThanOrEqual(raised);
      expect(await payoutTransfersTo(chain, claim.payoutAddress)).toHaveLength(1);
    } finally {
      await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: startFee });
      await chain.testClient.mine({ blocks: 1 });
      await repricing.stop();
    }
  });
});
