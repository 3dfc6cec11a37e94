import { type Hex, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { receiptMessage } from "../../api/receipts/receiptMessage.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { waitFor } from "../support/waitFor.ts";

/** A completed claim's receipt: anyone can check it with viem, and the service tells forgeries. */

let stack: Stack;
let receipt: { claim_id: string; message: string; signature: Hex; signer: string };
let holder: string;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A" } });
  const payer = stack.chain.users[0];
  if (!payer) throw new Error("no user");
  holder = payer.address;
  const created = await stack.api<{ claim_id: string }>("/api/claims", {
    body: { payout_address: holder },
  });
  const paymentHash = await stack.chain.transferUsdc(payer, stack.chain.payTo.address, 10_000_000n);
  await stack.mine(2);
  receipt = await waitFor(
    async () => {
      const response = await stack.api<typeof receipt>(
        `/api/claims/${created.body.claim_id}/receipt`,
      );
      return response.status === 200 ? response.body : undefined;
    },
    { what: "the receipt" },
  );
  expect(receipt.message).toContain(`Payment tx: ${paymentHash}`);
});

afterAll(async () => {
  await stack?.stop();
});

async function verify(message: string, signature: Hex) {
  return stack.api("/api/receipts/verify", { body: { message, signature } });
}

describe("receipts", () => {
  it("is signed by the receipt key, not the payout key, and verifies with viem", async () => {
    expect(receipt.signer).toBe(stack.chain.receiptSigner.address);
    expect(receipt.signer).not.toBe(stack.chain.payout.address);
    expect(
      await verifyMessage({
        address: stack.chain.receiptSigner.address,
        message: receipt.message,
        signature: receipt.signature,
      }),
    ).toBe(true);
    const claim = await stack.api(`/api/claims/${receipt.claim_id}`);
    expect(receipt.message).toContain(`Holder: ${holder}`);
    expect(receipt.message).toContain("Statement: the holder earned 1 USDC");
    expect(receipt.message).toContain(`Payout tx: ${claim.body.payout_tx}`);
    expect(receipt.message).toContain("Chain id: 8453");
  });

  it("calls the receipt on record genuine and current", async () => {
    const response = await verify(receipt.message, receipt.signature);
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      valid: true,
      genuine: true,
      current: true,
      reason: "ok",
      claim_id: receipt.claim_id,
    });
  });

  it("says what the chain holds of the payment and the payout the receipt names", async () => {
    await stack.mine(1);
    // The chain's answers are shared for READ_CACHE_MS: the new block shows within that.
    const chain = await waitFor(
      async () => {
        const response = await verify(receipt.message, receipt.signature);
        const read = response.body.chain as Record<string, Record<string, unknown>>;
        return Number(read.payout?.confirmations) >= 1 ? read : undefined;
      },
      { what: "the payout's confirmation to show" },
    );
    expect(chain.payment).toMatchObject({ state: "on_chain" });
    expect(chain.payout).toMatchObject({ state: "on_chain" });
    expect(chain.payout?.confirmations).toBeGreaterThanOrEqual(1);
    expect(Number(chain.payment?.block_number)).toBeLessThan(Number(chain.payout?.block_number));
  });

  it("calls an altered message not genuine", async () => {
    const altered = receipt.message.replace("earned 1 USDC", "earned 100 USDC");
    const response = await verify(altered, receipt.signature);
    expect(response.body).toMatchObject({ valid: false, genuine: false });
  });

  it("calls a receipt signed by another key not genuine", async () => {
    const forger = privateKeyToAccount(generatePrivateKey());
    const signature = await forger.signMessage({ message: receipt.message });
    const response = await verify(receipt.message, signature);
    expect(response.body).toMatchObject({
      valid: false,
      genuine: false,
      reason: "signed_by_another_key",
      signer: forger.address,
    });
  });

  it("calls a receipt signed by our key but not on record not current", async () => {
    const ours = privateKeyToAccount(stack.chain.receiptSigner.privateKey);
    const message = receiptMessage({
      service: "pay-and-earn",
      site: "http://localhost",
      holder,
      claimId: "clm_neverexisted0000000000",
      paymentTx: `0x${"1".repeat(64)}`,
      payoutTx: `0x${"2".repeat(64)}`,
      chainId: 8453,
      issuedAt: new Date(),
    });
    const response = await verify(message, await ours.signMessage({ message }));
    expect(response.body).toMatchObject({
      genuine: true,
      current: false,
      valid: false,
      reason: "unknown_claim",
      chain: { payment: { state: "not_found" }, payout: { state: "not_found" } },
    });
  });

  it("refuses a malformed signature with 400", async () => {
    const response = await verify(receipt.message, "0x1234" as Hex);
    expect(response.status).toBe(400);
    expect(response.body.type).toBe("/problems/invalid_request");
  });
});
