import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { type Address, type Hex, parseGwei, parseSignature } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Attention } from "../../api/health/readAttention.ts";
import { runCli } from "../support/cliProcess.ts";
import {
  type SignedAuthorization,
  signTransferAuthorization,
  submitAuthorization,
} from "../support/eip3009.ts";
import { startTestIndexer } from "../support/indexer.ts";
import { payoutsWithoutPayment } from "../support/moneyInvariant.ts";
import { callDevnetToken, payoutTransfersTo } from "../support/payouts.ts";
import { testServiceEnv } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * A foreign transaction from the payout key (a second service misconfigured with the same key)
 * takes the nonce of a settle-and-pay still in the pool (docs/payments.md#one-transaction-settlement):
 * that transaction would have settled the payer's authorization AND paid the holder, so neither
 * happened. The operator's re-issue (docs/operating.md#reissuing-a-payout) must never pay out
 * without a payment: a new settle-and-pay while the authorization is unused and valid, a plain
 * payout only once the claim was paid on its own, otherwise the claim fails with nothing paid.
 * After each scenario the chain's logs must show no payout without 10 USDC arriving at pay_to
 * for it, and no claim paid out twice.
 */

const CONFIRMATIONS = 2;
const PAYOUT_CONFIRMATIONS = 3;
const SETTINGS = {
  CONFIRMATIONS: String(CONFIRMATIONS),
  PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS),
  PAYOUT_FOREIGN_NONCE_GRACE_SECONDS: "0",
  X402_SETTLE_TIMEOUT_MS: "3000",
  PAYOUT_INTERVAL_MS: "50",
  // Health is read anew on each request: the scenarios wait on what it counts.
  READ_CACHE_MS: "0",
};
let stack: Stack;
/** Indexers a scenario started again after stopping the stack's. */
const indexers: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  stack = await startStack({ serviceEnv: SETTINGS });
});

afterEach(async () => {
  if (!stack) return;
  await stack.chain.testClient.setAutomine(true);
  await stack.mine(CONFIRMATIONS);
  expect(await payoutsWithoutPayment(stack.chain, stack.service.sql, CONFIRMATIONS)).toEqual([]);
});

afterAll(async () => {
  for (const indexer of indexers) await indexer.stop();
  await stack?.stop();
});

/** `pay-and-earn reissue-payout`, with the service's settings unless `settings` says otherwise. */
const reissue = (claimId: string, settings: Record<string, string> = {}) =>
  runCli(
    ["reissue-payout", claimId],
    testServiceEnv(stack.chain, stack.database.url, { ...SETTINGS, ...settings }),
    { timeoutMs: 30_000 },
  ).then((run) => ({ code: run.code, output: run.stdout + run.stderr }));

async function attention(reason: keyof Attention): Promise<number> {
  const { body } = await stack.api<{ attention: Attention | null }>("/api/health");
  return body.attention?.[reason] ?? -1;
}

async function payoutsOf(claimId: string) {
  return stack.service.sql<
    { nonce: bigint; status: string; settles_x402: boolean; tx_hash: Hex }[]
  >`
    select nonce, status, settles_x402, tx_hash from app.payouts
    where claim_id = ${claimId} order by nonce`;
}

async function stateOf(claimId: string) {
  const [claim] = await stack.service.sql<{ status: string; failure_reason: string | null }[]>`
    select status, failure_reason from app.claims where id = ${claimId}`;
  const [record] = await stack.service.sql<{ status: string; failure_reason: string | null }[]>`
    select status, failure_reason from app.x402_payments where claim_id = ${claimId}`;
  return { claim, record };
}

/** The same payment sent again: answered from its record, as a replay is. */
async function replay(taken: { header: string; holder: Address }) {
  const response = await fetch(`${stack.service.url}/api/x402/earn`, {
    method: "POST",
    headers: { "content-type": "application/json", "payment-signature": taken.header },
    body: JSON.stringify({ payout_address: taken.holder }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The authorization inside a PAYMENT-SIGNATURE header, as anyone reading the pool has it. */
function authorizationIn(header: string): SignedAuthorization {
  const { authorization, signature } = decodePaymentSignatureHeader(header).payload as {
    authorization: Record<string, string>;
    signature: Hex;
  };
  const { v, r, s } = parseSignature(signature);
  return {
    from: authorization.from as Address,
    to: authorization.to as Address,
    value: BigInt(authorization.value as string),
    validAfter: BigInt(authorization.validAfter as string),
    validBefore: BigInt(authorization.validBefore as string),
    nonce: authorization.nonce as Hex,
    v: Number(v),
    r,
    s,
  };
}

/**
 * An x402 payment whose settle-and-pay is broadcast and unmined when a transaction of the payout
 * key's that is none of ours takes its nonce; mined, counted by health, PAYOUT_CONFIRMATIONS deep.
 */
async function settleAndPayWithItsNonceTaken(options: { validBefore?: bigint } = {}) {
  const holder = privateKeyToAccount(generatePrivateKey()).address;
  const payerKey = generatePrivateKey();
  const payer = { address: privateKeyToAccount(payerKey).address, privateKey: payerKey };
  await callDevnetToken(stack.chain, { functionName: "mint", args: [payer.address, 10n * USDC] });
  const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
    payout_address: holder,
  });
  const header = await handSignedPayment(
    privateKeyToAccount(payerKey),
    terms.accepts[0] as PaymentRequirements,
    options.validBefore ? { validBefore: options.validBefore } : {},
  );

  await stack.chain.testClient.setAutomine(false);
  const answer = fetch(`${stack.service.url}/api/x402/earn`, {
    method: "POST",
    headers: { "content-type": "application/json", "payment-signature": header },
    body: JSON.stringify({ payout_address: holder }),
  });
  const pending = await waitFor(
    async () => {
      const [row] = await stack.service.sql<{ claim_id: string; nonce: bigint }[]>`
        select p.claim_id, p.nonce from app.payouts p join app.claims c on c.id = p.claim_id
        where c.payout_address = ${holder.toLowerCase()} and p.status = 'broadcast'
          and p.settles_x402`;
      return row;
    },
    { what: "the settle-and-pay to be broadcast, and not mined" },
  );
  // Higher fees: it takes the settle-and-pay's place in the pool, and its nonce.
  const foreign = await stack.chain.walletFor(stack.chain.payout).sendTransaction({
    to: stack.chain.user(0).address,
    value: 1n,
    nonce: Number(pending.nonce),
    gas: 21_000n,
    maxFeePerGas: parseGwei("100"),
    maxPriorityFeePerGas: parseGwei("50"),
  });
  await stack.mine(1);
  expect((await stack.chain.publicClient.getTransactionReceipt({ hash: foreign })).status).toBe(
    "success",
  );
  await stack.whileMining(
    async () => (await attention("payout_nonce_taken")) > 0,
    "health to count payout_nonce_taken",
  );
  await stack.mine(PAYOUT_CONFIRMATIONS);
  // Nothing was settled, nothing paid out.
  expect((await stateOf(pending.claim_id)).claim?.status).toBe("awaiting_payment");
  expect(await stack.chain.usdcBalance(payer.address)).toBe(10n * USDC);
  expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);
  return { holder, payer, header, claimId: pending.claim_id, answer };
}

describe("a foreign transaction that takes a settle-and-pay's nonce", () => {
  it("the authorization unused and valid: re-issued as a new settle-and-pay, one payment and one payout", async () => {
    const taken = await settleAndPayWithItsNonceTaken();

    // The command's settings are not the service's: without SettleAndPay there, or at an
    // address without its code, a new settle-and-pay would never be sent, or would settle
    // nothing. A person looks; nothing is abandoned.
    const withoutCode = privateKeyToAccount(generatePrivateKey()).address;
    for (const settings of [
      { SETTLE_AND_PAY_ADDRESS: "" },
      { SETTLE_AND_PAY_ADDRESS: withoutCode },
    ]) {
      const refused = await reissue(taken.claimId, settings);
      expect(refused.code, refused.output).not.toBe(0);
      expect(refused.output).toMatch(/needs_a_person/);
      expect(refused.output).toMatch(/SETTLE_AND_PAY_ADDRESS/);
      expect(await payoutsOf(taken.claimId)).toMatchObject([
        { status: "broadcast", settles_x402: true },
      ]);
      expect(await stateOf(taken.claimId)).toMatchObject({
        claim: { status: "awaiting_payment" },
      });
    }

    // Two operators at once: one re-issues, the other is told it changed or was done.
    const runs = await Promise.all([reissue(taken.claimId), reissue(taken.claimId)]);
    const succeeded = runs.filter((run) => run.code === 0);
    expect(succeeded, runs.map((run) => run.output).join("\n")).toHaveLength(1);
    expect(succeeded[0]?.output).toMatch(/new settle-and-pay/);
    expect(runs.find((run) => run.code !== 0)?.output).toMatch(/already|not waiting|changed/i);
    const claim = await stack.whileMining(async () => {
      const { body } = await stack.api(`/api/claims/${taken.claimId}`);
      return body.status === "completed" ? body : undefined;
    }, "the claim to be completed by the new settle-and-pay");
    expect([200, 202]).toContain((await taken.answer).status);

    const payouts = await payoutsOf(taken.claimId);
    expect(payouts).toMatchObject([
      { status: "abandoned", settles_x402: true },
      { status: "confirmed", settles_x402: true },
    ]);
    // The one transaction that paid the holder also took the payer's 10 USDC.
    expect(claim.payout_tx).toBe(payouts[1]?.tx_hash);
    expect(claim.payment).toMatchObject({ matched_by: "x402", tx_hash: payouts[1]?.tx_hash });
    expect(await payoutTransfersTo(stack.chain, taken.holder)).toHaveLength(1);
    expect(await stack.chain.usdcBalance(taken.payer.address)).toBe(0n);
    expect(await attention("payout_nonce_taken")).toBe(0);

    const twice = await reissue(taken.claimId);
    expect(twice.code).not.toBe(0);
    expect(twice.output).toMatch(/already|not waiting/i);
  });

  it("the payer spends its authorization's nonce elsewhere meanwhile: the claim fails, nothing is paid out", async () => {
    // The payer read its own authorization back (or kept it), saw the settle-and-pay gone, and
    // moves its 10 USDC to an address of its own with the same nonce: a plain payout now would
    // be 1 USDC for nothing.
    const taken = await settleAndPayWithItsNonceTaken();
    const keeper = privateKeyToAccount(generatePrivateKey()).address;
    const { nonce } = authorizationIn(taken.header);
    await submitAuthorization(
      stack.chain,
      stack.chain.user(2),
      await signTransferAuthorization(taken.payer, keeper, 10n * USDC, { nonce }),
    );
    await stack.mine(1);
    expect(await stack.chain.usdcBalance(keeper)).toBe(10n * USDC);

    // Its use is not final yet: a reorg could undo it, and the authorization settle after all.
    const early = await reissue(taken.claimId);
    expect(early.code).not.toBe(0);
    expect(early.output).toMatch(/not final/i);

    await stack.mine(PAYOUT_CONFIRMATIONS);
    const done = await reissue(taken.claimId);
    expect(done.code, done.output).toBe(0);
    expect(done.output).toMatch(/no payout is sent/);
    // The request still waiting is told so: 402.
    expect([202, 402]).toContain((await taken.answer).status);
    expect(await stateOf(taken.claimId)).toEqual({
      claim: { status: "failed", failure_reason: "x402_settlement_failed" },
      record: { status: "failed", failure_reason: "authorization_spent_elsewhere" },
    });
    // A replay is told what became of the authorization.
    expect(await replay(taken)).toMatchObject({
      status: 402,
      body: { reason: "nonce_already_used" },
    });
    expect(await payoutsOf(taken.claimId)).toMatchObject([
      { status: "abandoned", settles_x402: true },
    ]);
    expect(await attention("payout_nonce_taken")).toBe(0);

    // Later rounds of the sender (a later payment's) pay it nothing.
    const later = await settleAndPayLater();
    expect(later.status).toBe("completed");
    expect(await payoutsOf(taken.claimId)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, taken.holder)).toHaveLength(0);
  });

  it("somebody mines the copied authorization to pay_to meanwhile: the claim is paid by it and gets one plain payout", async () => {
    const taken = await settleAndPayWithItsNonceTaken();
    // The index lags (here: stopped), so the matcher has not seen what comes next when the
    // operator runs the re-issue.
    await stack.untilIndexedHead();
    await stack.ponder.stop();
    // A pool watcher kept the authorization from the settle-and-pay's bytes and mines it.
    const copy = await submitAuthorization(
      stack.chain,
      stack.chain.user(1),
      authorizationIn(taken.header),
    );
    await stack.mine(1 + PAYOUT_CONFIRMATIONS);
    expect(await stack.chain.usdcBalance(taken.payer.address)).toBe(0n);

    // Used at final depth, by the authorized transfer to pay_to: that is the claim's payment,
    // not a use elsewhere. The claim must not fail; it waits for the matcher's record.
    const early = await reissue(taken.claimId);
    expect(early.code, early.output).not.toBe(0);
    expect(early.output).toMatch(/payment_not_recorded/);
    expect(await stateOf(taken.claimId)).toMatchObject({
      claim: { status: "awaiting_payment" },
      record: { status: expect.stringMatching(/^(settling|unknown)$/) },
    });
    expect(await payoutsOf(taken.claimId)).toMatchObject([
      { status: "broadcast", settles_x402: true },
    ]);

    indexers.push(await startTestIndexer(stack.chain, stack.database.url));
    await stack.whileMining(
      async () => (await stateOf(taken.claimId)).claim?.status === "paid",
      "the matcher to pay the claim by its authorization",
    );

    const done = await reissue(taken.claimId);
    expect(done.code, done.output).toBe(0);
    expect(done.output).toMatch(/signs a new payout/);
    const claim = await stack.whileMining(async () => {
      const { body } = await stack.api(`/api/claims/${taken.claimId}`);
      return body.status === "completed" ? body : undefined;
    }, "the claim to be completed by a plain payout");
    expect([200, 202]).toContain((await taken.answer).status);
    expect(claim.payment).toMatchObject({ matched_by: "x402", tx_hash: copy });
    expect(await payoutsOf(taken.claimId)).toMatchObject([
      { status: "abandoned", settles_x402: true },
      { status: "confirmed", settles_x402: false },
    ]);
    expect(await payoutTransfersTo(stack.chain, taken.holder)).toHaveLength(1);
    expect(await stack.chain.usdcBalance(taken.payer.address)).toBe(0n);
    expect(await attention("payout_nonce_taken")).toBe(0);
  });
});

// Last: it moves the chain's clock past the authorization it signs.
describe("a foreign transaction that takes a settle-and-pay's nonce, its authorization run out", () => {
  it("the claim fails, nothing is paid out", async () => {
    const validBefore = BigInt(Math.floor(Date.now() / 1000)) + 50n;
    const taken = await settleAndPayWithItsNonceTaken({ validBefore });
    await stack.chain.testClient.increaseTime({ seconds: 60 });
    await stack.mine(1);

    const done = await reissue(taken.claimId);
    expect(done.code, done.output).toBe(0);
    // The settlement watcher may have failed the expired claim first: then only the payout is
    // abandoned.
    expect(done.output).toMatch(/no payout is sent|nothing is sent/);
    expect([202, 402]).toContain((await taken.answer).status);
    const { claim, record } = await stateOf(taken.claimId);
    expect(claim).toEqual({ status: "failed", failure_reason: "x402_settlement_failed" });
    expect(record).toEqual({ status: "failed", failure_reason: "authorization_expired_unsettled" });
    expect(await replay(taken)).toMatchObject({
      status: 402,
      body: { reason: "authorization_expired" },
    });
    expect(await payoutsOf(taken.claimId)).toMatchObject([
      { status: "abandoned", settles_x402: true },
    ]);
    expect(await payoutTransfersTo(stack.chain, taken.holder)).toHaveLength(0);
    expect(await stack.chain.usdcBalance(taken.payer.address)).toBe(10n * USDC);
    expect(await attention("payout_nonce_taken")).toBe(0);
  });
});

/** Another x402 payment, settled and paid out in one transaction: the sender's rounds went on. */
async function settleAndPayLater() {
  await stack.chain.testClient.setAutomine(true);
  const holder = privateKeyToAccount(generatePrivateKey()).address;
  const payerKey = generatePrivateKey();
  const payer = privateKeyToAccount(payerKey);
  await callDevnetToken(stack.chain, { functionName: "mint", args: [payer.address, 10n * USDC] });
  const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
    payout_address: holder,
  });
  const response = await fetch(`${stack.service.url}/api/x402/earn`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "payment-signature": await handSignedPayment(payer, terms.accepts[0] as PaymentRequirements),
    },
    body: JSON.stringify({ payout_address: holder }),
  });
  const { claim_id } = (await response.json()) as { claim_id: string };
  return stack.untilClaimStatus(claim_id, "completed");
}
