import { decodePaymentResponseHeader } from "@x402/core/http";
import { type DiscoveryExtension, validateDiscoveryExtension } from "@x402/extensions/bazaar";
import { type Hex, parseEventLogs, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { devnetSettleAndPayAddress } from "../../scripts/devnet/settleAndPay.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, payingFetch, paymentTerms } from "../support/x402.ts";

/** POST /api/x402/earn with the official client (@x402/fetch + @x402/evm) on Anvil. */

let stack: Stack;
let url: string;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "B" } });
  url = `${stack.service.url}/api/x402/earn`;
});

afterAll(async () => {
  await stack?.stop();
});

/** Transfers from `payer` to pay_to, from the chain's logs. */
async function paymentsFrom(payer: Hex) {
  return stack.chain.publicClient.getContractEvents({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    eventName: "Transfer",
    args: { from: payer, to: stack.chain.payTo.address },
    fromBlock: 0n,
  });
}

/** The fields of the answers this file looks at (200, 202, 402 problem). */
interface X402Answer {
  claim_id: string;
  status: string | number;
  payout_tx: string | null;
  receipt: { message: string; signature: Hex; signer: string } | null;
  payment: Record<string, unknown> | null;
  status_url: string;
  agent_name?: string;
  payout_address?: string;
  type?: string;
  detail?: string;
  accepts?: unknown;
}

const answer = async (response: Response) => (await response.json()) as X402Answer;

const post = (fetcher: typeof fetch, body: unknown, headers: Record<string, string> = {}) =>
  fetcher(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

describe("x402 with the official client", () => {
  it("answers 402 with the terms in PAYMENT-REQUIRED and in the body", async () => {
    const terms = await paymentTerms(url, { payout_address: stack.chain.user(0).address });
    expect(terms.x402Version).toBe(2);
    expect(terms.accepts).toEqual([
      {
        scheme: "exact",
        network: "eip155:8453",
        asset: BASE_USDC_ADDRESS,
        amount: "10000000",
        payTo: stack.chain.payTo.address,
        maxTimeoutSeconds: 300,
        extra: { name: "USD Coin", version: "2" },
      },
    ]);
    expect(terms.extensions).toHaveProperty("bazaar.info.input.method", "POST");
    expect(terms.extensions).toHaveProperty("bazaar.schema");
    // The declaration's example answer validates against its own schema.
    expect(
      validateDiscoveryExtension((terms.extensions as { bazaar: DiscoveryExtension }).bazaar),
    ).toEqual({ valid: true });
    expect(terms.extensions).toHaveProperty("payment-identifier.info.required", false);

    const response = await post(fetch, { payout_address: stack.chain.user(0).address });
    const body = await answer(response);
    expect(response.status).toBe(402);
    expect(body).toMatchObject({ type: "/problems/payment_required", status: 402, x402Version: 2 });
    expect(body.accepts).toEqual(terms.accepts);
    expect(body.detail).toMatch(/\$10/);
  });

  it("refuses a bad body with 400 before asking for any payment", async () => {
    for (const body of [
      { payout_address: "0x123" },
      { payout_address: stack.chain.user(0).address, email: "no" },
    ]) {
      const response = await post(fetch, body);
      expect(response.status).toBe(400);
      expect(response.headers.get("payment-required")).toBeNull();
    }
  });

  it("is refused by a client with the default $1 cap before anything is signed or sent", async () => {
    const payer = stack.chain.user(1);
    const before = {
      balance: await stack.chain.usdcBalance(payer.address),
      claims: await stack.claimCount(),
    };

    await expect(
      post(payingFetch(payer.privateKey), { payout_address: payer.address }),
    ).rejects.toThrow(/spendControls\.maxAmountPerPayment/);

    expect(await stack.chain.usdcBalance(payer.address)).toBe(before.balance);
    expect(await stack.claimCount()).toBe(before.claims);
  });

  it("pays with the cap raised: settles, pays out 1 USDC, returns a receipt that verifies", async () => {
    const payer = stack.chain.user(2);
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const before = await stack.chain.usdcBalance(payer.address);

    const response = await post(payingFetch(payer.privateKey, "$10"), {
      payout_address: holder,
      agent_name: "x402-agent",
    });
    const body = await answer(response);

    expect(response.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({
      status: "completed",
      agent_name: "x402-agent",
      payout_address: holder,
    });
    expect(body.claim_id).toMatch(/^clm_/);
    expect(body.payout_tx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(body.status_url).toContain(body.claim_id);
    const settlement = decodePaymentResponseHeader(response.headers.get("payment-response") ?? "");
    expect(settlement).toMatchObject({
      success: true,
      network: "eip155:8453",
      payer: payer.address,
    });
    expect(body.payment).toMatchObject({ matched_by: "x402", tx_hash: settlement.transaction });
    // Settled and paid out in one transaction, through SettleAndPay (docs/payments.md#one-transaction-settlement).
    expect(body.payout_tx).toBe(settlement.transaction);
    const mined = await stack.chain.publicClient.getTransaction({
      hash: settlement.transaction as `0x${string}`,
    });
    expect(mined.to).toBe(devnetSettleAndPayAddress(stack.chain.accounts).toLowerCase());
    expect(mined.from).toBe(stack.chain.payout.address.toLowerCase());
    // One receipt, one block: the payer's 10 USDC to pay_to and the payout wallet's 1 USDC to
    // the holder are both its Transfer logs.
    const receipt = await stack.chain.publicClient.getTransactionReceipt({ hash: mined.hash });
    const transfers = parseEventLogs({ abi: usdcAbi, eventName: "Transfer", logs: receipt.logs });
    expect(
      transfers.map(({ args }) => ({ from: args.from, to: args.to, value: args.value })),
    ).toEqual([
      { from: payer.address, to: stack.chain.payTo.address, value: 10n * USDC },
      { from: stack.chain.payout.address, to: holder, value: USDC },
    ]);
    expect(
      await verifyMessage({
        address: stack.chain.receiptSigner.address,
        message: body.receipt?.message ?? "",
        signature: body.receipt?.signature ?? "0x",
      }),
    ).toBe(true);
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before - 10n * USDC);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("answers a replay of the same payment with the same claim and never pays twice", async () => {
    const payer = stack.chain.user(3);
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const terms = await paymentTerms(url, { payout_address: holder });
    const header = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as never,
    );

    const first = await post(fetch, { payout_address: holder }, { "payment-signature": header });
    const firstBody = await answer(first);
    const again = await post(fetch, { payout_address: holder }, { "payment-signature": header });
    const againBody = await answer(again);

    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(againBody.claim_id).toBe(firstBody.claim_id);
    expect(againBody.payout_tx).toBe(firstBody.payout_tx);
    expect(again.headers.get("payment-response")).toBe(first.headers.get("payment-response"));
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("settles concurrent identical requests once", async () => {
    const payer = stack.chain.user(4);
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const terms = await paymentTerms(url, { payout_address: holder });
    const header = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as never,
    );

    const responses = await Promise.all(
      [1, 2, 3, 4].map(() =>
        post(fetch, { payout_address: holder }, { "payment-signature": header }),
      ),
    );
    const bodies = await Promise.all(responses.map(answer));

    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200]);
    expect(new Set(bodies.map((body) => body.claim_id)).size).toBe(1);
    expect(await paymentsFrom(payer.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("never lets the x402 transfer pay the payer's own open claim", async () => {
    const payer = stack.chain.user(5);
    // Variant B: 10 USDC from the payout address would pay this claim by the sender rule.
    const open = await stack.api<{ claim_id: string }>("/api/claims", {
      body: { payout_address: payer.address },
    });

    const response = await post(payingFetch(payer.privateKey, "$10"), {
      payout_address: payer.address,
    });
    const body = await answer(response);
    expect(response.status, JSON.stringify(body)).toBe(200);
    expect(body.status).toBe("completed");

    // Let the matcher pass the settlement transfer with its confirmations, then check.
    const settlement = decodePaymentResponseHeader(response.headers.get("payment-response") ?? "");
    const { blockNumber } = await stack.chain.publicClient.getTransactionReceipt({
      hash: settlement.transaction as Hex,
    });
    await stack.mine(3);
    await waitFor(
      async () => {
        const [cursor] = await stack.service.sql<{ block_number: bigint }[]>`
        select block_number from app.matcher_cursor`;
        return (cursor?.block_number ?? -1n) >= blockNumber;
      },
      { what: "the matcher to pass the settlement transfer" },
    );
    const explained = await stack.api(`/api/payments/${settlement.transaction}`);
    expect(explained.body.transfers).toEqual([
      expect.objectContaining({ state: "paid_claim", claim_id: body.claim_id, matched_by: "x402" }),
    ]);
    expect((await stack.api(`/api/claims/${open.body.claim_id}`)).body.status).toBe(
      "awaiting_payment",
    );
    expect(await payoutTransfersTo(stack.chain, payer.address)).toHaveLength(1);
  });
});
