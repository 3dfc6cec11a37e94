import { decodePaymentSignatureHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import {
  appendPaymentIdentifierToExtensions,
  generatePaymentId,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * What the payer's signature does not cover (the request body) and the x402
 * payment-identifier extension: a replay naming another payout address is refused, and an
 * idempotency id gets the first answer for the same request and a 409 for another.
 */

let stack: Stack;
let url: string;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "B" }, rpcProxy: true });
  url = `${stack.service.url}/api/x402/earn`;
});

afterAll(async () => {
  await stack?.stop();
});

const newHolder = () => privateKeyToAccount(generatePrivateKey()).address;

/** Transfers from `payer` to pay_to, from the chain's logs. */
function paymentsFrom(payer: Hex) {
  return stack.chain.publicClient.getContractEvents({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    eventName: "Transfer",
    args: { from: payer, to: stack.chain.payTo.address },
    fromBlock: 0n,
  });
}

interface Answer {
  claim_id?: string;
  status?: string | number;
  type?: string;
  reason?: string;
  payout_tx?: string | null;
}

async function post(body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer };
}

/** The official client, its cap raised to the price, sending `paymentId` with every payment. */
function fetchWithPaymentId(privateKey: Hex, paymentId: string) {
  const client = x402Client.fromConfig({
    schemes: [
      { network: "eip155:8453", client: new ExactEvmScheme(privateKeyToAccount(privateKey)) },
    ],
    spendControls: { maxAmountPerPayment: "$10" },
  });
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    paymentRequired.extensions ??= {};
    appendPaymentIdentifierToExtensions(paymentRequired.extensions, paymentId);
  });
  const paying = wrapFetchWithPayment(fetch, client);
  return async (body: unknown) => {
    const response = await paying(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Answer };
  };
}

describe("a replay of an x402 payment", () => {
  // Seen in CI: of four identical requests at once, one verified the authorization after a twin
  // had settled it (its nonce then used) and was refused 402 though the payment went through.
  it("verified after its twin settled it, is answered as the twin, not refused", async () => {
    const proxy = stack.rpcProxy;
    if (!proxy) throw new Error("the stack has no RPC proxy");
    const payer = stack.chain.user(5);
    const holder = newHolder();
    const terms = await paymentTerms(url, { payout_address: holder });
    const header = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as never,
    );

    // The first request is held at its first chain read, after it found no record of the
    // payment; its twin meanwhile verifies, records and settles the same authorization.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = true;
    let reached = () => {};
    const heldNow = new Promise<void>((resolve) => {
      reached = resolve;
    });
    proxy.rule = (call) => {
      if (!holding || call.method !== "eth_call") return { kind: "pass" };
      holding = false;
      reached();
      return { kind: "hold", until: held };
    };
    const late = post({ payout_address: holder }, { "payment-signature": header });
    await heldNow;
    const twin = await post({ payout_address: holder }, { "payment-signature": header });
    expect(twin.status).toBe(200);
    release();
    const answer = await late;
    proxy.rule = () => ({ kind: "pass" });

    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.claim_id).toBe(twin.body.claim_id);
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("naming another payout address is refused with 409, and nothing more moves", async () => {
    const payer = stack.chain.user(0);
    const holder = newHolder();
    const thief = newHolder();
    const terms = await paymentTerms(url, { payout_address: holder });
    const header = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as never,
    );

    const first = await post({ payout_address: holder }, { "payment-signature": header });
    expect(first.status).toBe(200);
    const replay = await post({ payout_address: thief }, { "payment-signature": header });

    expect(replay.status).toBe(409);
    expect(replay.body).toMatchObject({
      type: expect.stringMatching(/payment_already_used$/),
      claim_id: first.body.claim_id,
    });
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, thief)).toHaveLength(0);
  });

  it("is a risk the offer states: the signature does not cover the payout address", async () => {
    const offer = await stack.api<{ x402: { how: string } }>("/api/info");
    const how = offer.body.x402.how;
    expect(how).toMatch(/signature covers the payment, not this body/);
    expect(how).toMatch(/first chooses the payout_address/);
    expect(how).toMatch(/409 payment_already_used/);
  });
});

describe("the payment-identifier extension", () => {
  it("is declared, optional, in the 402 answer", async () => {
    const terms = await paymentTerms(url, { payout_address: newHolder() });
    expect(terms.extensions?.[PAYMENT_IDENTIFIER]).toMatchObject({ info: { required: false } });
  });

  it("gives a retry of the same request the first answer, though newly signed, and charges once", async () => {
    const payer = stack.chain.user(1);
    const holder = newHolder();
    const earn = fetchWithPaymentId(payer.privateKey, generatePaymentId());

    const first = await earn({ payout_address: holder, agent_name: "retrying" });
    const retry = await earn({ payout_address: holder, agent_name: "retrying" });

    expect(first.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.body.claim_id).toBe(first.body.claim_id);
    expect(retry.body.payout_tx).toBe(first.body.payout_tx);
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("answers the same id with another request 409, and charges nothing for it", async () => {
    const payer = stack.chain.user(2);
    const holder = newHolder();
    const other = newHolder();
    const earn = fetchWithPaymentId(payer.privateKey, generatePaymentId());

    const first = await earn({ payout_address: holder });
    expect(first.status).toBe(200);
    const conflicting = await earn({ payout_address: other });

    expect(conflicting.status).toBe(409);
    expect(conflicting.body).toMatchObject({
      type: expect.stringMatching(/payment_identifier_conflict$/),
      claim_id: first.body.claim_id,
    });
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, other)).toHaveLength(0);
  });

  it("refuses a malformed id before anything is settled", async () => {
    const payer = stack.chain.user(3);
    const holder = newHolder();
    const terms = await paymentTerms(url, { payout_address: holder });
    const signed = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as never,
    );
    // The extensions are not signed: a client can put anything there.
    const payload = decodePaymentSignatureHeader(signed) as PaymentPayload;
    const header = encodePaymentSignatureHeader({
      ...payload,
      extensions: { [PAYMENT_IDENTIFIER]: { info: { required: false, id: "short" } } },
    });

    const refused = await post({ payout_address: holder }, { "payment-signature": header });
    expect(refused.status).toBe(402);
    expect(refused.body.reason).toBe("invalid_payment_identifier");
    expect(await paymentsFrom(payer.address)).toHaveLength(0);
  });
  it("judges the id by the schema it declared, never by a schema the client sends with it", async () => {
    const payer = stack.chain.user(4);
    const holder = newHolder();
    const paymentId = generatePaymentId();
    // No info satisfies this schema (`not: {}`), and its pattern backtracks exponentially on
    // `note`: the SDK's own check compiled and ran whatever schema came with the payment.
    const hostileSchema = {
      type: "object",
      properties: { note: { type: "string", pattern: "^(a+)+$" } },
      not: {},
    };
    const pay = async () => {
      const terms = await paymentTerms(url, { payout_address: holder });
      const signed = await handSignedPayment(
        privateKeyToAccount(payer.privateKey),
        terms.accepts[0] as never,
      );
      const payload = decodePaymentSignatureHeader(signed) as PaymentPayload;
      const info = { required: false, id: paymentId, note: `${"a".repeat(24)}!` };
      const header = encodePaymentSignatureHeader({
        ...payload,
        extensions: { [PAYMENT_IDENTIFIER]: { info, schema: hostileSchema } },
      });
      return post({ payout_address: holder }, { "payment-signature": header });
    };

    const first = await pay();
    expect(first.status).toBe(200);
    expect(first.body.status).toBe("completed");
    // The id was taken: a newly signed retry of the same request gets the first answer.
    const retry = await pay();
    expect(retry.status).toBe(200);
    expect(retry.body.claim_id).toBe(first.body.claim_id);
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });
});
