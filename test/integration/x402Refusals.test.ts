import { decodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Stack, startStack } from "../support/stack.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * Every way an x402 payment is refused: a precise 402 (reason in the body and in the
 * PAYMENT-REQUIRED header's `error`), no claim opened, no USDC moved.
 */

let stack: Stack;
let url: string;
let requirements: PaymentRequirements;
let payer: PrivateKeyAccount;

beforeAll(async () => {
  stack = await startStack();
  url = `${stack.service.url}/api/x402/earn`;
  const account = stack.chain.users[0];
  if (!account) throw new Error("no user");
  payer = privateKeyToAccount(account.privateKey);
  const terms = await paymentTerms(url, { payout_address: payer.address });
  requirements = terms.accepts[0] as PaymentRequirements;
});

afterAll(async () => {
  await stack?.stop();
});

async function pay(header: string) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "payment-signature": header },
    body: JSON.stringify({ payout_address: payer.address }),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

const now = () => BigInt(Math.floor(Date.now() / 1000));
const stranger = privateKeyToAccount(generatePrivateKey());

const cases: [string, () => Promise<string>, string][] = [
  [
    "another amount",
    () => handSignedPayment(payer, requirements, { accepted: { amount: "9000000" } }),
    "amount_mismatch",
  ],
  [
    "an authorization for another value than accepted",
    () => handSignedPayment(payer, requirements, { value: "1" }),
    "amount_mismatch",
  ],
  [
    "another asset",
    () => handSignedPayment(payer, requirements, { accepted: { asset: stranger.address } }),
    "asset_mismatch",
  ],
  [
    "another network",
    () => handSignedPayment(payer, requirements, { accepted: { network: "eip155:1" } }),
    "network_mismatch",
  ],
  [
    "another payTo",
    () => handSignedPayment(payer, requirements, { accepted: { payTo: stranger.address } }),
    "pay_to_mismatch",
  ],
  [
    "an expired authorization",
    () => handSignedPayment(payer, requirements, { validBefore: now() - 60n }),
    "authorization_expired",
  ],
  [
    "an authorization not valid yet",
    () => handSignedPayment(payer, requirements, { validAfter: now() + 3600n }),
    "authorization_not_yet_valid",
  ],
  [
    "a signature by another key",
    () => handSignedPayment(payer, requirements, { signer: stranger }),
    "invalid_signature",
  ],
  [
    "a payer without 10 USDC",
    () => handSignedPayment(stranger, requirements),
    "insufficient_balance",
  ],
  ["a header that is not base64 JSON", async () => "not base64!", "invalid_payment_header"],
  [
    "an x402 v1 payload",
    async () => Buffer.from(JSON.stringify({ x402Version: 1, scheme: "exact" })).toString("base64"),
    "unsupported_x402_version",
  ],
];

describe("x402 refusals", () => {
  it.each(cases)(
    "refuses %s with a precise 402, no claim and no transfer",
    async (_, header, reason) => {
      const before = {
        claims: await stack.claimCount(),
        payer: await stack.chain.usdcBalance(payer.address),
        payTo: await stack.chain.usdcBalance(stack.chain.payTo.address),
      };

      const { response, body } = await pay(await header());

      expect(response.status).toBe(402);
      expect(body).toMatchObject({ type: "/problems/payment_refused", status: 402, reason });
      expect(body.detail).toMatch(/No claim was opened/);
      const terms = decodePaymentRequiredHeader(response.headers.get("payment-required") ?? "");
      expect(terms.error).toBeTruthy();
      expect(terms.accepts).toEqual([requirements]);
      expect(await stack.claimCount()).toBe(before.claims);
      expect(await stack.chain.usdcBalance(payer.address)).toBe(before.payer);
      expect(await stack.chain.usdcBalance(stack.chain.payTo.address)).toBe(before.payTo);
    },
  );
});
