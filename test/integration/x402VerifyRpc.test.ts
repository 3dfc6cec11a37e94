import type { PaymentRequirements } from "@x402/core/types";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payoutTransfersTo } from "../support/payouts.ts";
import type { RpcCall } from "../support/rpcProxy.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { handSignedPayment, payingFetch, paymentTerms } from "../support/x402.ts";

/**
 * Found by the fault suite (RELIABILITY.md#what-the-suite-found): the x402 SDK's local verification
 * turns a chain read that fails into a verdict (a `getCode` that throws is `invalid_signature`, a
 * simulation that throws is `payment_invalid`), so a valid payment was refused for good, 402,
 * whenever the RPC hiccupped. The refusal of a verification that could not read the chain is not
 * believed: the answer is 503 with Retry-After, nothing moves, and the same client paying again is
 * paid.
 */

let stack: Stack;

beforeAll(async () => {
  // On the settle-first path (SETTLE_AND_PAY_ADDRESS unset): the facilitator's settlement
  // verifies the payment again, and that second read is one of the reads tested here. In one
  // transaction (docs/payments.md#one-transaction-settlement) there is no second verification.
  stack = await startStack({ rpcProxy: true, serviceEnv: { SETTLE_AND_PAY_ADDRESS: "" } });
});

afterAll(async () => {
  await stack?.stop();
});

function proxy() {
  if (!stack.rpcProxy) throw new Error("the stack has no RPC proxy");
  return stack.rpcProxy;
}

/** Every call of `method` fails (the node did not answer it) until the rule is put back. */
function failEvery(method: string) {
  proxy().rule = (call: RpcCall) =>
    call.method === method ? { kind: "error", message: "node unavailable" } : { kind: "pass" };
}

const earn = (payerIndex: number, holder: string) =>
  payingFetch(stack.chain.user(payerIndex).privateKey, "$10")(
    `${stack.service.url}/api/x402/earn`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payout_address: holder }),
    },
  );

/** A payment from user `payerIndex` signed by another key: verification refuses it. */
async function wrongKeyPayment(payerIndex: number): Promise<Response> {
  const holder = privateKeyToAccount(generatePrivateKey()).address;
  const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
    payout_address: holder,
  });
  const header = await handSignedPayment(
    privateKeyToAccount(stack.chain.user(payerIndex).privateKey),
    terms.accepts[0] as PaymentRequirements,
    { signer: privateKeyToAccount(generatePrivateKey()) },
  );
  return fetch(`${stack.service.url}/api/x402/earn`, {
    method: "POST",
    headers: { "content-type": "application/json", "payment-signature": header },
    body: JSON.stringify({ payout_address: holder }),
  });
}

describe("x402 verification while the RPC fails", () => {
  it.each([
    ["eth_getCode", "the payer's code"],
    ["eth_call", "the simulated transfer"],
  ])(
    "a %s that is not answered (%s) is a 503, not a refusal; paying again succeeds",
    async (method) => {
      const payer = stack.chain.user(0);
      const holder = privateKeyToAccount(generatePrivateKey()).address;
      const balance = await stack.chain.usdcBalance(payer.address);
      const claims = await stack.claimCount();

      failEvery(method);
      let refused: Response;
      try {
        refused = await earn(0, holder);
      } finally {
        proxy().rule = () => ({ kind: "pass" });
      }
      const body = (await refused.json()) as { type: string };
      expect(refused.status, JSON.stringify(body)).toBe(503);
      expect(body.type).toMatch(/facilitator_unavailable$/);
      expect(refused.headers.get("retry-after")).toBeTruthy();
      expect(await stack.claimCount()).toBe(claims);
      expect(await stack.chain.usdcBalance(payer.address)).toBe(balance);

      const paid = await earn(0, holder);
      expect(paid.status).toBe(200);
      expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
    },
  );

  it("a read not answered while the settlement verifies again is tried again: paid, not refused", async () => {
    // How many getCode calls one verification makes: count them for a payment it refuses.
    proxy().reset();
    await wrongKeyPayment(2);
    const perVerification = proxy().count("eth_getCode");
    expect(perVerification).toBeGreaterThan(0);

    // The next payment: its verification passes; the getCode calls of the settlement's own
    // verification go unanswered (once: the calls after them are answered).
    proxy().reset();
    let seen = 0;
    proxy().rule = (call: RpcCall) => {
      if (call.method !== "eth_getCode") return { kind: "pass" };
      seen += 1;
      return seen > perVerification && seen <= 2 * perVerification
        ? { kind: "error", message: "node unavailable" }
        : { kind: "pass" };
    };
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    try {
      const paid = await earn(3, holder);
      expect(paid.status, await paid.clone().text()).toBe(200);
    } finally {
      proxy().rule = () => ({ kind: "pass" });
    }
    expect(seen).toBeGreaterThan(2 * perVerification);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("still refuses a signature by the wrong key when the node answers (402 invalid_signature)", async () => {
    const response = await wrongKeyPayment(1);
    expect(response.status).toBe(402);
    expect(((await response.json()) as { reason: string }).reason).toBe("invalid_signature");
  });
});
