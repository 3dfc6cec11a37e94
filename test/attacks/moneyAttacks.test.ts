import type { PaymentRequirements } from "@x402/core/types";
import {
  type Address,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  keccak256,
  maxUint256,
  parseGwei,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { runCli } from "../support/cliProcess.ts";
import { signTransferAuthorization, submitAuthorization } from "../support/eip3009.ts";
import { payoutsWithoutPayment } from "../support/moneyInvariant.ts";
import { callDevnetToken, payoutTransfersTo } from "../support/payouts.ts";
import { startTestService, testServiceEnv } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { authorizationNonceOf, handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * The attack suite (test/attacks/README.md): each known attack on the money,
 * run as the attacker would against a real stack (Anvil, PostgreSQL, Ponder, the service).
 * Whatever each scenario asserts of its own, after each one the chain's logs must show no
 * payout without at least 10 USDC arriving at pay_to, at confirmation depth, for it.
 */

const CONFIRMATIONS = 2;
const PAYOUT_CONFIRMATIONS = 3;
const SERVICE_ENV = {
  CONFIRMATIONS: String(CONFIRMATIONS),
  X402_SETTLE_TIMEOUT_MS: "3000",
  PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS),
  PAYOUT_FOREIGN_NONCE_GRACE_SECONDS: "0",
  // Health is read anew on each request: the scenarios wait on what it counts.
  READ_CACHE_MS: "0",
};
let stack: Stack;
/**
 * The same service's API without SettleAndPay (as with a remote facilitator): it settles first
 * and pays out in a second transaction (docs/payments.md#one-transaction-settlement).
 */
let settleFirst: Awaited<ReturnType<typeof startTestService>>;

/**
 * Claims whose breach of the invariant a scenario made on purpose (a reorg deeper than any
 * depth, a builder mining abandoned bytes) and asserted itself: the chain keeps them for the
 * rest of the file, so later checks leave them out and hold every other claim to it.
 */
const madeToBreach = new Set<string>();

beforeAll(async () => {
  stack = await startStack({ rpcProxy: true, serviceEnv: SERVICE_ENV });
  settleFirst = await startTestService(stack.chain, stack.database.url, {
    ...SERVICE_ENV,
    ROLE: "api",
    RPC_URL: stack.rpcProxy?.url ?? stack.chain.rpcUrl,
    SETTLE_AND_PAY_ADDRESS: "",
  });
});

afterEach(async () => {
  if (!stack) return;
  await stack.chain.testClient.setAutomine(true);
  expect(await unexpectedBreaches()).toEqual([]);
});

/** The invariant's breaches (test/support/moneyInvariant.ts) but those made on purpose. */
async function unexpectedBreaches(): Promise<string[]> {
  const breaches = await payoutsWithoutPayment(stack.chain, stack.service.sql, CONFIRMATIONS);
  return breaches.filter((line) => ![...madeToBreach].some((id) => line.includes(id)));
}

afterAll(async () => {
  await settleFirst?.stop();
  await stack?.stop();
});

/** A wallet of the attacker's own with 10 USDC and no ETH: it signs, somebody else submits. */
async function fundedPayer() {
  const privateKey = generatePrivateKey();
  const { address } = privateKeyToAccount(privateKey);
  await callDevnetToken(stack.chain, { functionName: "mint", args: [address, 10n * USDC] });
  return { address, privateKey };
}

/** Transactions Anvil holds unmined (automine off). */
async function pendingCount(): Promise<number> {
  const status = (await stack.chain.testClient.request({
    method: "txpool_status" as never,
  })) as { pending: Hex | number };
  return Number(status.pending);
}

/** Mines a block per poll until `check` holds (confirmations need the chain to move). */
function whileMining<T>(check: () => Promise<T | undefined | false>, what: string) {
  return stack.whileMining(check, what, { timeoutMs: 45_000, intervalMs: 300 });
}

describe("a payer who front-runs its own x402 settlement with the same nonce", () => {
  // The payer signs the 10 USDC authorization with nonce N and sends it to POST /api/x402/earn;
  // in the same block, ahead of the settlement, it submits its own transferWithAuthorization
  // reusing N for a trifle, with a higher tip. The settlement reverts (N is used); the trifle is
  // indexed carrying N. It must pay nothing: N is not the authorization the service verified.
  // Settled with its payout in one transaction, the whole transaction reverts: no payout
  // leaves, and the outcome is the chain's to tell (202) until the trifle is at depth.
  it.each([
    ["1 atomic unit, settled first, the settlement refused", 1n, "refused", "settle_first"],
    ["0 units, settled first, the settlement refused", 0n, "refused", "settle_first"],
    [
      "1 atomic unit, settled first, the settlement's outcome unknown",
      1n,
      "unknown",
      "settle_first",
    ],
    [
      "1 atomic unit, settled with its payout in one transaction",
      1n,
      "reverted",
      "one_transaction",
    ],
    ["0 units, settled with its payout in one transaction", 0n, "reverted", "one_transaction"],
    [
      "1 atomic unit, settled with its payout, its broadcast's outcome unknown",
      1n,
      "unknown",
      "one_transaction",
    ],
  ] as const)(
    "for %s: the trifle pays nothing, says why, and fails the claim",
    async (_, trifle, outcome, path) => {
      const serviceUrl = path === "settle_first" ? settleFirst.url : stack.service.url;
      const payer = await fundedPayer();
      const holder = privateKeyToAccount(generatePrivateKey()).address;
      const terms = await paymentTerms(`${serviceUrl}/api/x402/earn`, {
        payout_address: holder,
      });
      const header = await handSignedPayment(
        privateKeyToAccount(payer.privateKey),
        terms.accepts[0] as PaymentRequirements,
      );
      const nonce = authorizationNonceOf(header);
      const frontRun = await signTransferAuthorization(payer, stack.chain.payTo.address, trifle, {
        nonce,
      });

      await stack.untilIndexedHead();
      const proxy = stack.rpcProxy;
      if (!proxy) throw new Error("no proxy");
      if (outcome === "unknown") {
        // The node takes the settlement, the facilitator hears a timeout: it cannot know.
        proxy.rule = (call) =>
          call.method === "eth_sendRawTransaction"
            ? { kind: "error_after_forwarding", message: "request timed out" }
            : { kind: "pass" };
      }
      await stack.chain.testClient.setAutomine(false);
      const answer = fetch(`${serviceUrl}/api/x402/earn`, {
        method: "POST",
        headers: { "content-type": "application/json", "payment-signature": header },
        body: JSON.stringify({ payout_address: holder }),
      });
      // The facilitator (or the payout sender) has broadcast the settlement: the payer sees it in
      // the pool and sends its own use of the same nonce with a higher tip, for the same block.
      await waitFor(async () => (await pendingCount()) >= 1, {
        what: "the settlement to reach the pool",
      });
      const frontRunTx = await submitAuthorization(stack.chain, stack.chain.user(1), frontRun, {
        maxPriorityFeePerGas: parseGwei("50"),
        maxFeePerGas: parseGwei("100"),
      });
      await stack.mine(1);
      await stack.chain.testClient.setAutomine(true);
      proxy.rule = () => ({ kind: "pass" });

      const frontRunReceipt = await stack.chain.publicClient.getTransactionReceipt({
        hash: frontRunTx,
      });
      expect(frontRunReceipt.status).toBe("success");
      const response = await answer;
      // Refused (the settlement reverted), or unknown: never paid.
      expect(response.status).toBe(outcome === "refused" ? 402 : 202);
      if (path === "one_transaction") {
        // The settle-and-pay transaction was mined after the trifle, reverted, paid nothing.
        const [payout] = await stack.service.sql<{ status: string; settles_x402: boolean }[]>`
          select p.status, p.settles_x402 from app.payouts p join app.claims c on c.id = p.claim_id
          where c.payout_address = ${holder.toLowerCase()}`;
        expect(payout).toEqual({ status: "reverted", settles_x402: true });
      }

      // The trifle reaches confirmation depth and the matcher decides on it: unmatched, and why.
      const shown = await whileMining(async () => {
        const { body } = await stack.api(`/api/payments/${frontRunTx}`);
        const [transfer] = (body.transfers ?? []) as Record<string, unknown>[];
        return transfer && ["unmatched", "paid_claim"].includes(transfer.state as string)
          ? transfer
          : undefined;
      }, "the front-run transfer to be decided");
      expect(shown).toMatchObject({ state: "unmatched", reason: "not_the_verified_authorization" });

      const [claim] = await stack.service.sql<{ id: string; status: string }[]>`
      select id, status from app.claims where payout_address = ${holder.toLowerCase()}`;
      expect(claim?.status).toBe("failed");
      const [record] = await stack.service.sql<{ status: string; failure_reason: string }[]>`
      select status, failure_reason from app.x402_payments where claim_id = ${claim?.id ?? ""}`;
      // Unknown until the matcher saw the nonce spent at depth; refused at once otherwise.
      expect(record?.status).toBe("failed");
      if (outcome !== "refused")
        expect(record?.failure_reason).toBe("authorization_spent_elsewhere");
      await stack.mine(CONFIRMATIONS + 1);
      expect(await payoutTransfersTo(stack.chain, holder as Address)).toHaveLength(0);
    },
  );
});

describe("a reorg deeper than CONFIRMATIONS", () => {
  // The matcher decided block X (a payment); a reorg from X - 1 mines that payment again, and a
  // payment the old chain never had, both at X - 1: below the cursor. Stepping back one block
  // would never read them; the matcher must go back to where the chains split.
  it("is followed to where the chains split: a payment mined again lower is read and pays", async () => {
    const first = stack.chain.user(2);
    const second = stack.chain.user(3);
    // A block decided before, that both chains share: where they split above.
    const earlier = await stack.chain.transferUsdc(first, stack.chain.payTo.address, 1n);
    await whileMining(async () => {
      const { body } = await stack.api(`/api/payments/${earlier}`);
      const [transfer] = (body.transfers ?? []) as Record<string, unknown>[];
      return transfer?.state === "unmatched";
    }, "an earlier transfer to be decided");
    const firstClaim = await stack.createClaim(first.address);
    const secondClaim = await stack.createClaim(second.address);
    const firstPayment = await stack.chain.signedUsdcTransfer(
      first,
      stack.chain.payTo.address,
      10n * USDC,
    );
    const paidIn = (
      await stack.chain.publicClient.waitForTransactionReceipt({
        hash: await stack.chain.publicClient.sendRawTransaction({
          serializedTransaction: firstPayment,
        }),
      })
    ).blockNumber;
    await whileMining(async () => {
      const { body } = await stack.api(`/api/claims/${firstClaim.claim_id}`);
      return body.status === "completed";
    }, "the first claim to complete");
    const [payout] = await stack.service.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.payouts where claim_id = ${firstClaim.claim_id}`;
    const payoutRaw = (await stack.chain.testClient.request({
      method: "eth_getRawTransactionByHash" as never,
      params: [payout?.tx_hash] as never,
    })) as Hex;
    // Never sent on the old chain: mined only in the new one, below the matcher's cursor.
    const secondPayment = await stack.chain.signedUsdcTransfer(
      second,
      stack.chain.payTo.address,
      10n * USDC,
    );

    await stack.untilIndexedHead();
    const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
    const splitAbove = paidIn - 2n;
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [
        Number(head - splitAbove),
        [
          [firstPayment, 0],
          [secondPayment, 0],
          [payoutRaw, 1],
        ],
      ] as never,
    });
    expect(head - splitAbove).toBeGreaterThan(CONFIRMATIONS);

    const completed = await whileMining(async () => {
      const { body } = await stack.api(`/api/claims/${secondClaim.claim_id}`);
      return body.status === "completed" ? body : undefined;
    }, "the claim paid by the payment mined below the cursor to complete");
    expect(completed.payment).toMatchObject({ matched_by: "sender" });
    expect(await payoutTransfersTo(stack.chain, second.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, first.address)).toHaveLength(1);
  });
});

/** The stored bytes and nonce of a claim's payouts, lowest nonce first. */
async function payoutsOf(claimId: string) {
  return stack.service.sql<{ nonce: bigint; tx_hash: Hex; raw_tx: Hex; status: string }[]>`
    select nonce, tx_hash, raw_tx, status from app.payouts
    where claim_id = ${claimId} order by nonce`;
}

/** A claim for `payer`'s own address, paid 10 USDC from that address (its sender matches it), and completed. */
async function completedClaimPaidBy(payer: ReturnType<Stack["chain"]["user"]>) {
  const claim = await stack.createClaim(payer.address);
  const payment = await stack.chain.transferUsdc(payer, stack.chain.payTo.address, 10n * USDC);
  await whileMining(async () => {
    const { body } = await stack.api(`/api/claims/${claim.claim_id}`);
    return body.status === "completed";
  }, "the claim to complete");
  const [payout] = await payoutsOf(claim.claim_id);
  if (!payout) throw new Error("no payout");
  return { claim, payment, payout };
}

/** Replaces the blocks from `block` on (as many new ones), the new branch holding `included`. */
async function reorgFrom(block: bigint, included: [Hex, number][] = []) {
  await stack.untilIndexedHead();
  const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
  await stack.chain.testClient.request({
    method: "anvil_reorg" as never,
    params: [Number(head - block + 1n), included] as never,
  });
  return head - block + 1n;
}

/** Gone from the node's pool too, should the reorg have put them back there. */
async function forget(hashes: Hex[]) {
  for (const hash of hashes) await stack.chain.testClient.dropTransaction({ hash });
}

function minedIn(hash: Hex): Promise<bigint> {
  return stack.chain.publicClient
    .getTransactionReceipt({ hash })
    .then((receipt) => receipt.blockNumber);
}

type Attention = Record<string, number>;

/** Mines until health counts `reason` (its report is shared for READ_CACHE_MS). */
function untilAttention(reason: string) {
  return whileMining(async () => {
    const { body } = await stack.api<{ reasons: string[]; attention: Attention | null }>(
      "/api/health",
    );
    return (body.attention?.[reason] ?? 0) > 0 ? body : undefined;
  }, `health to count ${reason}`);
}

describe("a payment a reorg deeper than CONFIRMATIONS takes away after its payout", () => {
  // Past the confirmation depth nothing is undone (docs/operating.md#matcher-reorgs): the payout
  // stays. Nothing must stay silent about it.
  it("keeps its payout, and health counts the claim as paid out without a payment", async () => {
    const payer = stack.chain.user(4);
    const { claim, payment, payout } = await completedClaimPaidBy(payer);
    const paidIn = await minedIn(payment);
    const healthy = await stack.api<{ attention: Attention }>("/api/health");
    expect(healthy.body.attention.payout_without_payment).toBe(0);

    // The new branch holds the payout and not the payment.
    const depth = await reorgFrom(paidIn, [[payout.raw_tx, 0]]);
    await forget([payment]);
    expect(depth).toBeGreaterThan(CONFIRMATIONS);

    const health = await untilAttention("payout_without_payment");
    expect(health.reasons).toContain("payout_without_payment");
    expect(health.attention?.payout_without_payment).toBe(1);
    expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("completed");
    expect(await payoutTransfersTo(stack.chain, payer.address)).toHaveLength(1);
    // The chain's logs say the same as health: this claim, and no other.
    expect(await unexpectedBreaches()).toEqual([
      expect.stringContaining(`of ${claim.claim_id}: no transfer`),
    ]);
    madeToBreach.add(claim.claim_id);
  }, 120_000);
});

describe("a foreign transaction that takes a payout's nonce", () => {
  const reissue = (claimId: string) =>
    runCli(
      ["reissue-payout", claimId],
      testServiceEnv(stack.chain, stack.database.url, SERVICE_ENV),
    ).then((run) => ({ code: run.code, output: run.stdout + run.stderr }));

  // Someone with the payout key sends a transaction at the nonce of a payout still pending; the
  // operator re-issues the payout (pay-and-earn reissue-payout). A reorg then takes the foreign
  // transaction away, and whoever kept the first payout's bytes sends them again: the nonce is
  // free for them. Only a builder that mines them before anything else can pay twice, and
  // health must say so.
  it("is re-issued once; a reorg that frees the old nonce pays nothing twice; a builder that mines the old bytes anyway is counted by health", async () => {
    const payer = stack.chain.user(5);
    const claim = await stack.createClaim(payer.address);
    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, 10n * USDC);
    await stack.chain.testClient.setAutomine(false);
    await stack.mine(CONFIRMATIONS + 1);
    const first = await waitFor(
      async () => {
        const [row] = await payoutsOf(claim.claim_id);
        return row?.status === "broadcast" ? row : undefined;
      },
      { what: "the payout to be broadcast, and not mined" },
    );
    const foreign = await stack.chain.walletFor(stack.chain.payout).sendTransaction({
      to: stack.chain.user(0).address,
      value: 1n,
      nonce: Number(first.nonce),
      gas: 21_000n,
      maxFeePerGas: parseGwei("100"),
      maxPriorityFeePerGas: parseGwei("50"),
    });
    await stack.mine(1);
    const foreignIn = await minedIn(foreign);
    await untilAttention("payout_nonce_taken");

    await stack.mine(PAYOUT_CONFIRMATIONS);
    const reissued = await reissue(claim.claim_id);
    expect(reissued.code, reissued.output).toBe(0);
    await whileMining(
      async () => (await payoutsOf(claim.claim_id))[1]?.status === "confirmed",
      "the re-issued payout to be mined",
    );
    const [abandoned, paid] = await payoutsOf(claim.claim_id);
    if (!abandoned || !paid) throw new Error("no second payout");
    expect(abandoned.status).toBe("abandoned");
    expect(await payoutTransfersTo(stack.chain, payer.address)).toHaveLength(1);

    // The foreign transaction goes, and the re-issued payout with it; the first payout's bytes
    // come back to the pool, sent by whoever kept them.
    // The service's broadcasts wait until the old bytes are in the pool: the filler must
    // displace them there, not merely arrive first.
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("no proxy");
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    proxy.rule = (call) =>
      call.method === "eth_sendRawTransaction" ? { kind: "hold", until: held } : { kind: "pass" };
    try {
      await reorgFrom(foreignIn);
      await forget([foreign, paid.tx_hash]);
      await stack.chain.publicClient.sendRawTransaction({
        serializedTransaction: abandoned.raw_tx,
      });
    } finally {
      release();
      proxy.rule = () => ({ kind: "pass" });
    }
    const filler = await waitFor(
      async () => {
        const [row] = await stack.service.sql<{ tx_hash: Hex }[]>`
          select tx_hash from app.nonce_fillers where nonce = ${abandoned.nonce}`;
        if (!row) return undefined;
        const pooled = await stack.chain.publicClient
          .getTransaction({ hash: row.tx_hash })
          .catch(() => null);
        return pooled ? row : undefined;
      },
      { what: "a filler at the abandoned payout's nonce in the node's pool" },
    );
    // From the chain: the table still says `confirmed` of the re-issued payout until the
    // confirmer has seen it gone.
    const mined = (hash: Hex) =>
      stack.chain.publicClient.getTransactionReceipt({ hash }).then(
        () => true,
        () => false,
      );
    await whileMining(
      async () => (await mined(filler.tx_hash)) && (await mined(paid.tx_hash)),
      "the filler and the re-issued payout to be mined",
    );
    await expect(
      stack.chain.publicClient.getTransactionReceipt({ hash: abandoned.tx_hash }),
    ).rejects.toThrow();
    expect(await payoutTransfersTo(stack.chain, payer.address)).toHaveLength(1);
    expect(await payoutsWithoutPayment(stack.chain, stack.service.sql, CONFIRMATIONS)).toEqual(
      expect.not.arrayContaining([expect.stringContaining(claim.claim_id)]),
    );
    const calm = await stack.api<{ attention: Attention }>("/api/health");
    expect(calm.body.attention.claim_paid_twice).toBe(0);

    // A builder mines the old bytes in place of the filler: the claim is paid twice, and the
    // chain's logs, read by the indexer, show it.
    await reorgFrom(await minedIn(filler.tx_hash), [
      [abandoned.raw_tx, 0],
      [paid.raw_tx, 0],
    ]);
    await forget([filler.tx_hash]);
    expect(await payoutTransfersTo(stack.chain, payer.address)).toHaveLength(2);
    const health = await untilAttention("claim_paid_twice");
    expect(health.reasons).toContain("claim_paid_twice");
    expect(health.attention?.claim_paid_twice).toBe(1);
    const breaches = await payoutsWithoutPayment(stack.chain, stack.service.sql, CONFIRMATIONS);
    expect(breaches.filter((line) => line.includes(claim.claim_id))).toEqual([
      expect.stringContaining(`claim ${claim.claim_id} paid out more than once`),
    ]);
    madeToBreach.add(claim.claim_id);
  }, 180_000);
});

describe("a final payout a reorg deeper than PAYOUT_CONFIRMATIONS mines again as reverted", () => {
  // Past the payout depth nothing is undone by itself (docs/operating.md#payout-reorgs): the
  // claim stays completed. Nothing must stay silent about a payer who was not paid.
  it("is counted by health as missing on chain; the claim is left for a person", async () => {
    const chain = stack.chain;
    // Long before: the payout wallet gave someone an allowance (a key used elsewhere, say).
    const drawer = chain.user(6);
    await chain.walletFor(chain.payout).writeContract({
      address: BASE_USDC_ADDRESS,
      abi: erc20Abi,
      functionName: "approve",
      args: [drawer.address, maxUint256],
      gas: 100_000n,
    });
    const payer = chain.user(5);
    const { claim, payout } = await completedClaimPaidBy(payer);
    await whileMining(async () => {
      const [row] = await stack.service.sql<{ final: boolean }[]>`
        select final_at is not null as final from app.payouts where nonce = ${payout.nonce}`;
      return row?.final;
    }, "the payout to be final");
    const healthy = await stack.api<{ attention: Attention }>("/api/health");
    expect(healthy.body.attention.payout_missing_on_chain).toBe(0);
    const paidBefore = (await payoutTransfersTo(chain, payer.address)).length;

    // The new branch drains the wallet first: the payout's same bytes now revert.
    const payoutIn = await minedIn(payout.tx_hash);
    const held = await chain.usdcBalance(chain.payout.address);
    const drainer = chain.walletFor(drawer);
    const drain = await drainer.signTransaction(
      await drainer.prepareTransactionRequest({
        to: BASE_USDC_ADDRESS,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: "transferFrom",
          args: [chain.payout.address, drawer.address, held + USDC],
        }),
        gas: 100_000n,
        maxFeePerGas: parseGwei("100"),
        maxPriorityFeePerGas: parseGwei("50"),
      }),
    );
    const depth = await reorgFrom(payoutIn, [
      [drain, 0],
      [payout.raw_tx, 0],
    ]);
    expect(depth).toBeGreaterThan(PAYOUT_CONFIRMATIONS);
    const remined = await chain.publicClient.getTransactionReceipt({ hash: payout.tx_hash });
    expect(remined.status).toBe("reverted");

    const health = await untilAttention("payout_missing_on_chain");
    expect(health.reasons).toContain("payout_missing_on_chain");
    expect(health.attention?.payout_missing_on_chain).toBe(1);
    expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("completed");
    expect(await payoutTransfersTo(chain, payer.address)).toHaveLength(paidBefore - 1);
    // The drain left the payout wallet for no claim: the chain's logs say so, as they should.
    expect(await unexpectedBreaches()).toEqual([
      expect.stringContaining(`payout ${keccak256(drain)} belongs to no claim`),
    ]);
    madeToBreach.add(keccak256(drain));
    // Later scenarios' payouts need the wallet funded again.
    await callDevnetToken(chain, {
      functionName: "mint",
      args: [chain.payout.address, held + USDC],
    });
  }, 120_000);
});
