import { randomBytes } from "node:crypto";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { attachTx } from "../../api/claims/attachTx.ts";
import { createLogger } from "../../api/logger.ts";
import type { RunningPonder } from "../../scripts/devnet/ponder.ts";
import { startTestIndexer } from "../support/indexer.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type CreatedClaim, type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Attaching a transaction hash is open to anyone who knows a claim id: it must neither let a
 * stranger swap the claim's named hash for a made-up one, nor let a slow RPC take the database
 * (and with it every other route) down while attaches wait on the chain.
 */

type ClaimBody = Record<string, unknown> & {
  claim_id: string;
  amount_due_usdc: string;
  tx_hash: string | null;
};

const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const randomHash = (): Hex => `0x${randomBytes(32).toString("hex")}`;
const atomic = (usdc: string) => BigInt(Math.round(Number(usdc) * 1_000_000));

describe("a claim's named tx hash", () => {
  let stack: Stack;
  const attach = (claimId: string, txHash: string) =>
    stack.api<Record<string, unknown>>(`/api/claims/${claimId}/tx`, { body: { tx_hash: txHash } });
  const namedHash = async (claimId: string) =>
    (await stack.api<ClaimBody>(`/api/claims/${claimId}`)).body.tx_hash;

  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it("is replaced only by a mined transfer that qualifies, never by an unmined or a foreign one", async () => {
    const holder = freshAddress();
    const claim = await stack.createClaim(holder);
    const first = randomHash();

    const named = await attach(claim.claim_id, first);
    expect(named.status).toBe(202);
    expect(await namedHash(claim.claim_id)).toBe(first);

    // Anyone with the claim id tries to swap in another hash nobody has mined.
    const swapped = await attach(claim.claim_id, randomHash());
    expect(swapped.status).toBe(422);
    expect(swapped.body).toMatchObject({
      type: "/problems/tx_not_qualifying",
      reason: "replacement_not_mined",
    });
    expect(await namedHash(claim.claim_id)).toBe(first);

    // A mined transfer that does not pay this claim (the price, not its amount, from a
    // stranger's wallet) replaces nothing either.
    const foreign = await stack.chain.transferUsdc(
      stack.chain.user(3),
      stack.chain.payTo.address,
      10n * USDC,
    );
    const refused = await attach(claim.claim_id, foreign);
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ reason: "not_amount_due_nor_from_payout_address" });
    expect(await namedHash(claim.claim_id)).toBe(first);

    // The payer's real transfer of the claim's amount does, and pays the claim once.
    const paid = await stack.chain.transferUsdc(
      stack.chain.user(4),
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    const accepted = await attach(claim.claim_id, paid);
    expect(accepted.status).toBe(200);
    expect(await namedHash(claim.claim_id)).toBe(paid.toLowerCase());
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("answers an attach of the transfer that already paid the claim by its amount as matched, signed or not", async () => {
    // A client that attaches its payment after the matcher paid the claim by its exact amount
    // (a late attach; in the fault suite, one retried while the service restarted) is told its
    // transfer paid the claim, not that the claim is no longer open.
    const holder = freshAddress();
    const claim = await stack.createClaim(holder);
    const payer = stack.chain.user(5);
    const paid = await stack.chain.transferUsdc(
      payer,
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(await namedHash(claim.claim_id)).toBeNull();

    const unsigned = await attach(claim.claim_id, paid);
    expect(unsigned.status).toBe(200);
    expect(unsigned.body).toMatchObject({
      status: "completed",
      attached_tx: { tx_hash: paid, state: "matched", signed: false },
    });
    const signature = await stack.chain.walletFor(payer).signMessage({ message: claim.claim_id });
    const signed = await stack.api<Record<string, unknown>>(`/api/claims/${claim.claim_id}/tx`, {
      body: { tx_hash: paid, signature },
    });
    expect(signed.status).toBe(200);
    expect(signed.body).toMatchObject({
      attached_tx: { tx_hash: paid, state: "matched", signed: true },
    });
    // Signed by a wallet that did not send the transfer: answered, but not as signed.
    const stranger = await stack.chain
      .walletFor(stack.chain.user(4))
      .signMessage({ message: claim.claim_id });
    const strangers = await stack.api<Record<string, unknown>>(`/api/claims/${claim.claim_id}/tx`, {
      body: { tx_hash: paid, signature: stranger },
    });
    expect(strangers.status).toBe(200);
    expect(strangers.body).toMatchObject({
      attached_tx: { tx_hash: paid, state: "matched", signed: false },
    });
    // Any other transaction is still refused, and nothing is named or paid again.
    const other = await attach(claim.claim_id, randomHash());
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ type: "/problems/claim_not_open" });
    expect(await namedHash(claim.claim_id)).toBeNull();
    await stack.mine(2);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });
});

describe("attaches while the RPC hangs", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ rpcProxy: true });
  });
  afterAll(async () => {
    stack?.rpcProxy?.setMode("pass");
    await stack?.stop();
  });

  it("hold no database connection or lock: other routes answer within a second, and every attach gets an answer", async () => {
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("the stack has no RPC proxy");
    const claims: CreatedClaim[] = [];
    for (let index = 0; index < 16; index++) {
      claims.push(await stack.createClaim(freshAddress()));
    }
    const reader = claims[0] as CreatedClaim;

    proxy.setMode("hang");
    const callsBefore = proxy.count();
    const attaches = claims.map((claim) =>
      stack.api(`/api/claims/${claim.claim_id}/tx`, { body: { tx_hash: randomHash() } }),
    );
    // The attaches are waiting on the chain (the proxy has their calls and answers none).
    await waitFor(() => proxy.count() > callsBefore, { what: "an attach's RPC call" });

    const routes: [string, () => Promise<{ status: number }>, number][] = [
      ["GET /api/info", () => stack.api("/api/info"), 200],
      ["GET /api/claims/{id}", () => stack.api(`/api/claims/${reader.claim_id}`), 200],
      ["GET /api/ledger", () => stack.api("/api/ledger"), 200],
      [
        "POST /api/claims",
        () => stack.api("/api/claims", { body: { payout_address: freshAddress() } }),
        201,
      ],
    ];
    for (const [route, request, expected] of routes) {
      const started = performance.now();
      const response = await request();
      const elapsed = performance.now() - started;
      expect(response.status, route).toBe(expected);
      expect(elapsed, `${route} took ${Math.round(elapsed)} ms`).toBeLessThan(1_000);
    }

    // No attach waits for another's lock while the chain is slow: all sixteen reach it at once.
    await waitFor(() => proxy.count() - callsBefore >= 16, { what: "all attaches' RPC calls" });

    // The RPC comes back: each attach is answered (named, or told to retry), none with a 500.
    proxy.setMode("pass");
    const statuses = (await Promise.all(attaches)).map((response) => response.status);
    for (const status of statuses) expect([202, 503]).toContain(status);
  });

  it("answers an attach the RPC fails with 503 temporarily_unavailable and Retry-After, names nothing", async () => {
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("the stack has no RPC proxy");
    const claim = await stack.createClaim(freshAddress());
    proxy.setMode("fail");
    try {
      const response = await stack.api(`/api/claims/${claim.claim_id}/tx`, {
        body: { tx_hash: randomHash() },
      });
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("5");
      expect(response.body).toMatchObject({ type: "/problems/temporarily_unavailable" });
    } finally {
      proxy.setMode("pass");
    }
    expect((await stack.api<ClaimBody>(`/api/claims/${claim.claim_id}`)).body.tx_hash).toBeNull();
  });
});

describe("an attach racing the matcher (variant B)", () => {
  let stack: Stack;
  const restartedIndexers: RunningPonder[] = [];

  beforeAll(async () => {
    stack = await startStack({ rpcProxy: true, serviceEnv: { MATCHING_VARIANT: "B" } });
  });
  afterAll(async () => {
    stack?.rpcProxy?.setMode("pass");
    for (const indexer of restartedIndexers) await indexer.stop();
    await stack?.stop();
  });

  // Seen in the fault suite's long run: a signed attach answered 200, and the payment on chain
  // never paid its claim.
  it("pays the claim when the matcher passed the transfer over while the attach read the chain", async () => {
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("the stack has no RPC proxy");
    const holder = freshAddress();
    const claim = await stack.createClaim(holder);
    const payer = stack.chain.user(5);

    // The indexer is behind (stopped): the attach finds nothing indexed and asks the chain.
    await stack.ponder.stop();
    const hash = await stack.chain.transferUsdc(payer, stack.chain.payTo.address, 10n * USDC);
    const signature = await stack.chain.walletFor(payer).signMessage({ message: claim.claim_id });

    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const isReceiptOfPayment = (call: { method: string; params: unknown[] }) =>
      call.method === "eth_getTransactionReceipt" &&
      String(call.params[0]).toLowerCase() === hash.toLowerCase();
    proxy.rule = (call) =>
      isReceiptOfPayment(call) ? { kind: "hold", until: released } : { kind: "pass" };

    // The attach, as every surface calls it, with a chain reader patient enough to be held.
    const deps = {
      sql: stack.service.sql,
      chain: createChainReader(proxy.url, 8453, { timeoutMs: 120_000 }),
      config: stack.service.config,
      logger: createLogger("silent"),
    };
    const attaching = attachTx(deps, claim.claim_id, { tx_hash: hash, signature });
    await waitFor(() => proxy.calls.some(isReceiptOfPayment), {
      what: "the attach to ask the chain for the payment's receipt",
    });

    // Meanwhile the indexer catches up, the transfer confirms, and the matcher, which no claim
    // has told about it yet, passes it over.
    restartedIndexers.push(await startTestIndexer(stack.chain, stack.database.url));
    await stack.mine(3);
    await waitFor(
      async () =>
        (
          await stack.service.sql`
            select 1 from app.unmatched_transfers where tx_hash = ${hash.toLowerCase()}`
        ).length > 0,
      { what: "the matcher to pass the transfer over" },
    );

    release();
    const outcome = await attaching;
    proxy.rule = () => ({ kind: "pass" });
    expect(outcome).toMatchObject({ type: "attached", state: "matched", signed: true });
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  // Seen in the fault suite's long run: a deep reorg took the payment out of its block just
  // before the payer attached it signed; the service's node did not have it mined, refused the
  // attach (not_mined_to_sign), and the transfer went by the sender rule to the payer's own open
  // claim, whose own payment then paid nothing. A node a block behind the client's does the same.
  it("waits for a signed attach's transfer that the service's node does not have mined yet", async () => {
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("the stack has no RPC proxy");
    const payer = stack.chain.user(6);
    // The payer's own open claim: the sender rule would give it a transfer no claim names.
    const own = await stack.createClaim(payer.address);
    const holder = freshAddress();
    const claim = await stack.createClaim(holder);

    // The indexer is behind (stopped): the attach asks the chain, through a node that lags.
    await stack.ponder.stop();
    const hash = await stack.chain.transferUsdc(payer, stack.chain.payTo.address, 10n * USDC);
    const signature = await stack.chain.walletFor(payer).signMessage({ message: claim.claim_id });
    let lagging = true;
    proxy.rule = (call) =>
      lagging &&
      call.method === "eth_getTransactionReceipt" &&
      String(call.params[0]).toLowerCase() === hash.toLowerCase()
        ? { kind: "answer", result: null }
        : { kind: "pass" };
    const lagEnds = setTimeout(() => {
      lagging = false;
    }, 1_500);

    const attached = await stack.api<Record<string, unknown>>(`/api/claims/${claim.claim_id}/tx`, {
      body: { tx_hash: hash, signature },
    });
    clearTimeout(lagEnds);
    proxy.rule = () => ({ kind: "pass" });

    expect(attached.status).toBe(200);
    expect(attached.body).toMatchObject({ attached_tx: { tx_hash: hash, signed: true } });
    restartedIndexers.push(await startTestIndexer(stack.chain, stack.database.url));
    await stack.mine(3);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
    const ownNow = await stack.api<{ status: string }>(`/api/claims/${own.claim_id}`);
    expect(ownNow.body.status).toBe("awaiting_payment");

    // The same signed attach replayed after the payout: answered as before, nothing paid again.
    const replayed = await stack.api<Record<string, unknown>>(`/api/claims/${claim.claim_id}/tx`, {
      body: { tx_hash: hash, signature },
    });
    expect(replayed.status).toBe(200);
    expect(replayed.body).toMatchObject({ attached_tx: { tx_hash: hash, signed: true } });
    await stack.mine(3);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
    expect((await stack.api<{ status: string }>(`/api/claims/${own.claim_id}`)).body.status).toBe(
      "awaiting_payment",
    );
  });

  it("refuses a signed hash that never gets mined after the wait, and makes no one else wait", async () => {
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("the stack has no RPC proxy");
    // Signing needs no funds: a fresh key stands for a payer whose transfer never shows.
    const wallet = privateKeyToAccount(generatePrivateKey());
    const claim = await stack.createClaim(freshAddress());
    const neverMined = randomHash();
    const receiptReads = () =>
      proxy.calls.filter(
        (call) =>
          call.method === "eth_getTransactionReceipt" &&
          String(call.params[0]).toLowerCase() === neverMined.toLowerCase(),
      ).length;

    const refused = await stack.api<Record<string, unknown>>(`/api/claims/${claim.claim_id}/tx`, {
      body: {
        tx_hash: neverMined,
        signature: await wallet.signMessage({ message: claim.claim_id }),
      },
    });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ reason: "not_mined_to_sign" });
    expect(receiptReads()).toBeGreaterThan(1);

    // A claim that does not exist, or a signature that is not one: one read, no wait.
    const missingId = `clm_${"A".repeat(claim.claim_id.length - 4)}`;
    for (const [claimId, signature] of [
      [missingId, await wallet.signMessage({ message: missingId })],
      [claim.claim_id, `0x${"11".repeat(65)}`],
    ] as const) {
      const before = receiptReads();
      await stack.api(`/api/claims/${claimId}/tx`, { body: { tx_hash: neverMined, signature } });
      expect(receiptReads() - before).toBe(1);
    }
  });
});
