import { decodePaymentResponseHeader, decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { type Address, type Hex, parseGwei, parseSignature } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { CrashPoint } from "../../api/crashHook.ts";
import {
  signedAuthorizationCall,
  signTransferAuthorization,
  submitAuthorization,
} from "../support/eip3009.ts";
import { startTestIndexer } from "../support/indexer.ts";
import { payoutsWithoutPayment } from "../support/moneyInvariant.ts";
import { callDevnetToken, payoutTransfersTo } from "../support/payouts.ts";
import { startTestService, testServiceEnv } from "../support/service.ts";
import {
  ANNOUNCING_LOG_LEVEL,
  type ServiceProcess,
  startServiceProcess,
} from "../support/serviceProcess.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * Attacks on the one-transaction settlement (docs/payments.md#one-transaction-settlement), run
 * as the attacker would against a real stack. The stack's own service only answers (ROLE api);
 * the workers (the matcher, the payout sender that settles and pays out, the confirmer, the
 * watchers) run in a process of the test's own, so that it can be killed between signing and
 * broadcasting. After each scenario the chain's logs must show no payout without 10 USDC
 * arriving at pay_to for it.
 */

const CONFIRMATIONS = 2;
const PAYOUT_CONFIRMATIONS = 3;
const SETTINGS = {
  CONFIRMATIONS: String(CONFIRMATIONS),
  PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS),
  X402_SETTLE_TIMEOUT_MS: "20000",
  PAYOUT_INTERVAL_MS: "50",
};
let stack: Stack;
/** The worker process running now (the matcher, the payout sender and confirmer, …). */
let workers: ServiceProcess | undefined;
const processes: ServiceProcess[] = [];
/** Indexers a scenario started again after stopping the stack's. */
const indexers: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  // The stack's service answers only (ROLE api); the workers run in a process of the test's
  // own, which a scenario swaps for one that SIGKILLs itself at a crash point.
  stack = await startStack({ serviceEnv: { ...SETTINGS, ROLE: "api" } });
  workers = await startWorkers();
});

afterEach(async () => {
  if (!stack) return;
  await stack.chain.testClient.setAutomine(true);
  // Settled with its payout, a payment is exactly as deep as its payout: the invariant is read
  // once both could have been taken away by a reorg shallower than CONFIRMATIONS.
  await stack.mine(CONFIRMATIONS);
  expect(await payoutsWithoutPayment(stack.chain, stack.service.sql, CONFIRMATIONS)).toEqual([]);
});

afterAll(async () => {
  for (const running of processes) await running.stop();
  for (const indexer of indexers) await indexer.stop();
  await stack?.stop();
});

async function fundedPayer() {
  const privateKey = generatePrivateKey();
  const { address } = privateKeyToAccount(privateKey);
  await callDevnetToken(stack.chain, { functionName: "mint", args: [address, 10n * USDC] });
  return { address, privateKey };
}

async function signedPayment(holder: Address, serviceUrl = stack.service.url) {
  const payer = await fundedPayer();
  const terms = await paymentTerms(`${serviceUrl}/api/x402/earn`, {
    payout_address: holder,
  });
  const header = await handSignedPayment(
    privateKeyToAccount(payer.privateKey),
    terms.accepts[0] as PaymentRequirements,
  );
  return { payer, header };
}

function pay(holder: Address, header: string, serviceUrl = stack.service.url) {
  return fetch(`${serviceUrl}/api/x402/earn`, {
    method: "POST",
    headers: { "content-type": "application/json", "payment-signature": header },
    body: JSON.stringify({ payout_address: holder }),
  });
}

async function pendingCount(): Promise<number> {
  const status = (await stack.chain.testClient.request({
    method: "txpool_status" as never,
  })) as { pending: Hex | number };
  return Number(status.pending);
}

async function payoutsOf(holder: Address) {
  return stack.service.sql<
    { nonce: bigint; status: string; settles_x402: boolean; tx_hash: string }[]
  >`
    select p.nonce, p.status, p.settles_x402, p.tx_hash
    from app.payouts p join app.claims c on c.id = p.claim_id
    where c.payout_address = ${holder.toLowerCase()} order by p.nonce`;
}

/**
 * A worker process of the test's own (ROLE worker), SIGKILLing itself at `crashAt` if given,
 * once its loops run: what a scenario sends after it meets running workers.
 */
async function startWorkers(crashAt?: CrashPoint): Promise<ServiceProcess> {
  const running = startServiceProcess(
    testServiceEnv(stack.chain, stack.database.url, {
      ...SETTINGS,
      ROLE: "worker",
      LOG_LEVEL: ANNOUNCING_LOG_LEVEL,
      ...(crashAt ? { CRASH_AT: crashAt } : {}),
    }),
  );
  processes.push(running);
  await running.workersRunning();
  return running;
}

describe("a copied authorization mined first by somebody else", () => {
  it("reverts the settle-and-pay whole; the matcher pays the claim by its authorization, once", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(holder);
    const decoded = decodePaymentSignatureHeader(header).payload as {
      authorization: Record<string, string>;
      signature: Hex;
    };
    const { v, r, s } = parseSignature(decoded.signature);
    const copied = {
      from: decoded.authorization.from as Address,
      to: decoded.authorization.to as Address,
      value: BigInt(decoded.authorization.value as string),
      validAfter: BigInt(decoded.authorization.validAfter as string),
      validBefore: BigInt(decoded.authorization.validBefore as string),
      nonce: decoded.authorization.nonce as Hex,
      v: Number(v),
      r,
      s,
    };

    await stack.untilIndexedHead();
    await stack.chain.testClient.setAutomine(false);
    const answer = pay(holder, header);
    await waitFor(async () => (await pendingCount()) >= 1, {
      what: "the settle-and-pay to reach the pool",
    });
    // A watcher of the pool copies the payer's authorization and mines it first, itself.
    const copy = await submitAuthorization(stack.chain, stack.chain.user(1), copied, {
      maxPriorityFeePerGas: parseGwei("50"),
      maxFeePerGas: parseGwei("100"),
    });
    await stack.mine(1);
    await stack.chain.testClient.setAutomine(true);

    expect((await stack.chain.publicClient.getTransactionReceipt({ hash: copy })).status).toBe(
      "success",
    );
    const response = await answer;
    expect(response.status).toBe(202);
    const { claim_id } = (await response.json()) as { claim_id: string };
    const [first] = await payoutsOf(holder);
    expect(first).toMatchObject({ status: "reverted", settles_x402: true });

    // The copy is the verified authorization: it pays the claim at depth, and the claim gets
    // one ordinary payout once the reverted settle-and-pay is final.
    const done = await stack.whileMining(async () => {
      const claim = await stack.api(`/api/claims/${claim_id}`);
      return claim.body.status === "completed" ? claim.body : undefined;
    }, "the claim to be paid by the copied authorization and completed");
    expect(done.payment).toMatchObject({ matched_by: "x402", tx_hash: copy });
    expect(await stack.chain.usdcBalance(payer.address)).toBe(0n);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });
});

describe("the settle-and-pay across a crash of its sender", () => {
  it.each([
    ["after_settle_and_pay_signed", "signed, never sent"],
    ["after_settle_and_pay_broadcast", "sent, nothing about it stored"],
  ] as const)(
    "%s (%s): the stored bytes are what is mined, once; a replay during and after gets the same claim",
    async (crashAt, _what) => {
      await workers?.stop();
      const crashing = await startWorkers(crashAt);
      const holder = privateKeyToAccount(generatePrivateKey()).address;
      const { payer, header } = await signedPayment(holder);

      const first = pay(holder, header);
      const exit = await crashing.exited;
      expect(exit, crashing.output()).toEqual({ code: null, signal: "SIGKILL" });
      const [stored, ...more] = await payoutsOf(holder);
      expect(more).toEqual([]);
      // Committed before any broadcast; still `signed` (the broadcast's outcome never stored).
      expect(stored).toMatchObject({ status: "signed", settles_x402: true });
      const pooled = await stack.chain.publicClient
        .getTransaction({ hash: stored?.tx_hash as Hex })
        .then(
          () => true,
          () => false,
        );
      expect(pooled).toBe(crashAt === "after_settle_and_pay_broadcast");

      // A replay while nothing runs the payouts: the same claim, never a second settlement.
      const during = pay(holder, header);
      workers = await startWorkers();

      const [firstResponse, duringResponse] = await Promise.all([first, during]);
      const firstBody = (await firstResponse.json()) as Record<string, unknown>;
      const duringBody = (await duringResponse.json()) as Record<string, unknown>;
      // Paid, or (when two process starts on a loaded machine outlast the request's wait)
      // unknown to the request, the claim finished without it: the same claim either way.
      expect([200, 202], JSON.stringify(firstBody)).toContain(firstResponse.status);
      expect([200, 202], JSON.stringify(duringBody)).toContain(duringResponse.status);
      expect(duringBody.claim_id).toBe(firstBody.claim_id);
      const done = await stack.untilClaimStatus(firstBody.claim_id as string, "completed");
      // The very bytes stored before the crash were mined: never signed twice.
      expect(done.payout_tx).toBe(stored?.tx_hash);

      const after = await pay(holder, header);
      expect(after.status).toBe(200);
      const settlement = decodePaymentResponseHeader(after.headers.get("payment-response") ?? "");
      expect(settlement.transaction).toBe(stored?.tx_hash);
      for (const answered of [firstResponse, duringResponse]) {
        if (answered.status === 200) {
          expect(answered.headers.get("payment-response")).toBe(
            after.headers.get("payment-response"),
          );
        }
      }
      expect(await payoutsOf(holder)).toHaveLength(1);
      expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
      expect(await stack.chain.usdcBalance(payer.address)).toBe(0n);
    },
  );
});

/** The claim, its x402 record and its payouts, as the database has them. */
async function stateOf(holder: Address) {
  const [claim] = await stack.service.sql<{ id: string; status: string }[]>`
    select id, status from app.claims where payout_address = ${holder.toLowerCase()}`;
  const [record] = await stack.service.sql<{ status: string; failure_reason: string | null }[]>`
    select status, failure_reason from app.x402_payments where claim_id = ${claim?.id ?? ""}`;
  return { claim, record, payouts: await payoutsOf(holder) };
}

describe("authorizations that lapse a few seconds after they verify", () => {
  it("settle first, at once: none waits in the payout sender's rounds, where it would hold others back", async () => {
    // The facilitator verifies one valid for 6 s more; the sender starts none within 10 s of
    // its end. A payer could keep the sender's rounds full of such records for nothing.
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const payer = await fundedPayer();
    const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
      payout_address: holder,
    });
    const header = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as PaymentRequirements,
      { validBefore: BigInt(Math.floor(Date.now() / 1000)) + 9n },
    );

    const response = await pay(holder, header);
    expect(response.status).toBe(200);
    const state = await stateOf(holder);
    expect(state.record?.status).toBe("settled");
    await waitFor(async () => (await stateOf(holder)).claim?.status === "completed" || undefined, {
      what: "the claim to complete after its settlement",
    });
    expect(await payoutsOf(holder)).toMatchObject([{ settles_x402: false }]);
    expect(await stack.chain.usdcBalance(payer.address)).toBe(0n);
  });
});

describe("a SETTLE_AND_PAY_ADDRESS that does not hold SettleAndPay", () => {
  it("settles first and pays out after, in two transactions, and health says why", async () => {
    // An operator's slip: a call to an address without code is mined and does nothing, so a
    // settle-and-pay sent there would neither settle nor pay, and the claim would wait until
    // its authorization lapsed.
    const withoutCode = privateKeyToAccount(generatePrivateKey()).address;
    await workers?.stop();
    const misconfigured = await startTestService(stack.chain, stack.database.url, {
      ...SETTINGS,
      SETTLE_AND_PAY_ADDRESS: withoutCode,
    });
    try {
      const holder = privateKeyToAccount(generatePrivateKey()).address;
      const { payer, header } = await signedPayment(holder, misconfigured.url);
      const response = await pay(holder, header, misconfigured.url);
      expect(response.status).toBe(200);
      await waitFor(
        async () => (await stateOf(holder)).claim?.status === "completed" || undefined,
        {
          what: "the claim to complete in two transactions",
        },
      );
      const state = await stateOf(holder);
      expect(state.record?.status).toBe("settled");
      expect(state.payouts).toMatchObject([{ settles_x402: false }]);
      expect(await stack.chain.usdcBalance(payer.address)).toBe(0n);
      expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
      const health = (await (await fetch(`${misconfigured.url}/api/health`)).json()) as {
        reasons: string[];
      };
      expect(health.reasons).toContain("settle_and_pay_not_deployed");
    } finally {
      await misconfigured.stop();
      workers = await startWorkers();
    }
  });
});

describe("a settle-and-pay whose payout leg reverts", () => {
  it("the token blacklists the payout address: nothing moves, 402, the claim fails and says why", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(holder);
    await callDevnetToken(stack.chain, { functionName: "blacklist", args: [holder] });

    const response = await pay(holder, header);
    expect(response.status).toBe(402);
    const state = await stateOf(holder);
    // The payout leg reverted: the payment leg with it, the payer charged nothing.
    expect(state.payouts).toMatchObject([{ status: "reverted", settles_x402: true }]);
    expect(state.claim?.status).toBe("failed");
    expect(state.record).toEqual({
      status: "failed",
      failure_reason: "payout_recipient_blacklisted",
    });
    expect(await stack.chain.usdcBalance(payer.address)).toBe(10n * USDC);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);
  });
});

describe("a reorg that drops the settle-and-pay", () => {
  it("sends the same bytes again: mined once, one payout and one payment, the claim still completed", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(holder);
    const response = await pay(holder, header);
    const body = (await response.json()) as { claim_id: string; payout_tx: Hex };
    expect(response.status, JSON.stringify(body)).toBe(200);
    const { blockNumber } = await stack.chain.publicClient.getTransactionReceipt({
      hash: body.payout_tx,
    });

    await stack.untilIndexedHead();
    const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [Number(head - blockNumber + 1n), []] as never,
    });
    // Gone from the chain and from the node's pool: only the service can bring it back.
    await stack.chain.testClient.dropTransaction({ hash: body.payout_tx });
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);

    const again = await stack.whileMining(async () => {
      const receipt = await stack.chain.publicClient
        .getTransactionReceipt({ hash: body.payout_tx })
        .catch(() => null);
      return receipt?.status === "success" ? receipt : undefined;
    }, "the settle-and-pay sent again and mined");
    expect(again.blockNumber).toBeGreaterThan(blockNumber);
    const claim = await stack.untilClaimStatus(body.claim_id, "completed");
    expect(claim.payout_tx).toBe(body.payout_tx);
    expect(await payoutsOf(holder)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
    expect(await stack.chain.usdcBalance(payer.address)).toBe(0n);
  });
});

describe("a reorg that mines the settle-and-pay again after the payer spent its nonce", () => {
  // The payer signs, with the nonce of its x402 authorization, a transfer of its 10 USDC to an
  // address of its own. The settle-and-pay is mined and the claim completed; a reorg then mines
  // the payer's transfer first and the settle-and-pay behind it, where it reverts: neither leg
  // happened. The claim is back to paying, and its only payment was the reverted transaction's.
  it("pays nothing out: the claim's only payment went with the reverted transaction", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const keeper = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(holder);
    const { nonce } = (
      decodePaymentSignatureHeader(header).payload as { authorization: { nonce: Hex } }
    ).authorization;
    const elsewhere = await signedAuthorizationCall(
      stack.chain,
      stack.chain.user(2),
      await signTransferAuthorization(payer, keeper, 10n * USDC, { nonce }),
    );
    const response = await pay(holder, header);
    const body = (await response.json()) as { claim_id: string; payout_tx: Hex };
    expect(response.status, JSON.stringify(body)).toBe(200);
    const { blockNumber } = await stack.chain.publicClient.getTransactionReceipt({
      hash: body.payout_tx,
    });
    const settleAndPayRaw = (await stack.chain.testClient.request({
      method: "eth_getRawTransactionByHash" as never,
      params: [body.payout_tx] as never,
    })) as Hex;

    // The indexer stops first: the settlement watcher cannot say "lost" (it waits for the index),
    // so nothing but the sender's own rule keeps the claim from a second payout.
    await stack.untilIndexedHead();
    await stack.ponder.stop();
    const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [
        Number(head - blockNumber + 1n),
        [
          [elsewhere, 0],
          [settleAndPayRaw, 0],
        ],
      ] as never,
    });
    const reverted = await stack.chain.publicClient.getTransactionReceipt({ hash: body.payout_tx });
    expect(reverted.status).toBe("reverted");
    expect(await stack.chain.usdcBalance(keeper)).toBe(10n * USDC);

    // The confirmer sees it reverted, then final.
    await stack.whileMining(async () => {
      const [row] = await stack.service.sql<{ status: string; final_at: Date | null }[]>`
        select status, final_at from app.payouts where claim_id = ${body.claim_id}`;
      return row?.status === "reverted" && row.final_at !== null;
    }, "the settle-and-pay recorded reverted and final");
    // A later x402 call: its settle-and-pay is signed in a round of the sender that also looked
    // at every claim paid before it, this one included.
    const later = privateKeyToAccount(generatePrivateKey()).address;
    const laterPayment = await signedPayment(later);
    expect((await pay(later, laterPayment.header)).status).toBe(200);

    expect(await payoutsOf(holder)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);
    indexers.push(await startTestIndexer(stack.chain, stack.database.url));
    expect(await stack.chain.usdcBalance(stack.chain.payTo.address)).toBeGreaterThan(0n);
  });
});

// Last: it moves the chain's clock past every authorization signed so far.
describe("a settle-and-pay whose payment leg reverts", () => {
  it("the payer empties its wallet once it is verified: nothing moves, 202, and the claim fails once the authorization lapses", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(holder);
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address;
    const emptying = await signTransferAuthorization(payer, elsewhere, 10n * USDC);

    await stack.untilIndexedHead();
    await stack.chain.testClient.setAutomine(false);
    const answer = pay(holder, header);
    await waitFor(async () => (await pendingCount()) >= 1, {
      what: "the settle-and-pay to reach the pool",
    });
    // Verified with 10 USDC; the payer moves them away in the same block, tipping more.
    const moved = await submitAuthorization(stack.chain, stack.chain.user(1), emptying, {
      maxPriorityFeePerGas: parseGwei("50"),
      maxFeePerGas: parseGwei("100"),
    });
    await stack.mine(1);
    await stack.chain.testClient.setAutomine(true);
    expect((await stack.chain.publicClient.getTransactionReceipt({ hash: moved })).status).toBe(
      "success",
    );

    const response = await answer;
    expect(response.status).toBe(202);
    const state = await stateOf(holder);
    // The payment leg reverted: the payout leg with it. The chain decides what is left.
    expect(state.payouts).toMatchObject([{ status: "reverted", settles_x402: true }]);
    expect(state.claim?.status).toBe("awaiting_payment");
    expect(state.record?.status).toBe("unknown");
    expect(await stack.chain.usdcBalance(payer.address)).toBe(0n);
    expect(await stack.chain.usdcBalance(elsewhere)).toBe(10n * USDC);

    // Nobody ever settles it again (one settle-and-pay per authorization); once its window has
    // passed at depth, unused, the claim fails.
    await stack.chain.testClient.increaseTime({ seconds: 600 });
    const failed = await stack.whileMining(async () => {
      const claim = await stack.api(`/api/claims/${state.claim?.id}`);
      return claim.body.status === "failed" ? claim.body : undefined;
    }, "the claim to fail once its authorization lapsed");
    expect(failed.failure_reason).toBeTruthy();
    expect(await payoutsOf(holder)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);
  });
});
