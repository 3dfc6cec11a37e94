import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";

/**
 * Variant B end to end: 10 USDC from the payout address, or from any wallet with the tx hash
 * named at creation or attached later; and every refusal of a tx hash.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "B" } });
});

afterAll(async () => {
  await stack?.stop();
});

const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

async function createClaim(payoutAddress: Address, extra: Record<string, string> = {}) {
  return stack.api<Record<string, unknown> & { claim_id: string }>("/api/claims", {
    body: { payout_address: payoutAddress, ...extra },
  });
}

describe("variant B matching", () => {
  it("asks for exactly the price", async () => {
    const created = await createClaim(freshAddress());
    expect(created.status).toBe(201);
    expect(created.body.amount_due_usdc).toBe("10.000000");
    expect(created.body.amount).toBe("10.000000");
  });

  it("pays a claim from its payout address", async () => {
    const holder = stack.chain.user(0);
    const { body: claim } = await createClaim(holder.address);
    await stack.chain.transferUsdc(holder, stack.chain.payTo.address, 10n * USDC);
    await stack.mine(2);

    const done = await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(done.payment).toMatchObject({ matched_by: "sender" });
    expect(await payoutTransfersTo(stack.chain, holder.address)).toHaveLength(1);
  });

  it("pays a claim from another wallet when the tx hash is given at creation", async () => {
    const holder = stack.chain.user(1);
    const hash = await stack.chain.transferUsdc(
      stack.chain.user(2),
      stack.chain.payTo.address,
      10n * USDC,
    );
    await stack.mine(2);

    const { status, body: claim } = await createClaim(holder.address, { tx_hash: hash });
    expect(status).toBe(201);

    const done = await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(done.payment).toMatchObject({ matched_by: "tx_hash", tx_hash: hash });
    expect(await payoutTransfersTo(stack.chain, holder.address)).toHaveLength(1);

    // The client sends the same hash again (a retry): accepted as what it already is.
    const again = await stack.api(`/api/claims/${claim.claim_id}/tx`, { body: { tx_hash: hash } });
    expect(again.status).toBe(200);
    expect(again.body.attached_tx).toEqual({ tx_hash: hash, state: "matched", signed: false });
    expect(await payoutTransfersTo(stack.chain, holder.address)).toHaveLength(1);
  });

  it("accepts a tx hash attached before the tx is mined and completes once it confirms", async () => {
    const holder = stack.chain.user(3);
    const { body: claim } = await createClaim(holder.address);
    await stack.chain.testClient.setAutomine(false);
    let hash: Hex;
    try {
      hash = await stack.chain.walletFor(stack.chain.user(4)).writeContract({
        address: BASE_USDC_ADDRESS,
        abi: usdcAbi,
        functionName: "transfer",
        args: [stack.chain.payTo.address, 10n * USDC],
      });
      const attached = await stack.api(`/api/claims/${claim.claim_id}/tx`, {
        body: { tx_hash: hash },
      });
      expect(attached.status).toBe(202);
      expect(attached.body.attached_tx).toEqual({
        tx_hash: hash,
        state: "not_mined_yet",
        signed: false,
      });
    } finally {
      await stack.chain.testClient.setAutomine(true);
    }
    await stack.mine(3);

    const done = await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(done.payment).toMatchObject({ matched_by: "tx_hash", tx_hash: hash });
  });

  it("matches a transfer the matcher had already passed over when its hash is attached", async () => {
    const holder = stack.chain.user(5);
    const hash = await stack.chain.transferUsdc(
      stack.chain.user(6),
      stack.chain.payTo.address,
      12n * USDC,
    );
    await stack.mine(2);
    expect(await stack.untilTransferState(hash, "unmatched")).toMatchObject({
      reason: "no_matching_claim",
    });

    const { body: claim } = await createClaim(holder.address);
    const attached = await stack.api(`/api/claims/${claim.claim_id}/tx`, {
      body: { tx_hash: hash },
    });

    expect(attached.status).toBe(200);
    expect(attached.body.attached_tx).toEqual({ tx_hash: hash, state: "matched", signed: false });
    await stack.untilClaimStatus(claim.claim_id, "completed");
    const payment = await stack.api(`/api/payments/${hash}`);
    expect(payment.body.transfers).toEqual([
      expect.objectContaining({
        state: "paid_claim",
        claim_id: claim.claim_id,
        matched_by: "tx_hash",
      }),
    ]);
  });

  it("refuses one tx for two claims", async () => {
    const hash = await stack.chain.transferUsdc(
      stack.chain.user(0),
      stack.chain.payTo.address,
      10n * USDC,
    );
    const { body: first } = await createClaim(freshAddress());
    const { body: second } = await createClaim(freshAddress());

    expect(
      (await stack.api(`/api/claims/${first.claim_id}/tx`, { body: { tx_hash: hash } })).status,
    ).toBe(200);
    const again = await stack.api(`/api/claims/${second.claim_id}/tx`, { body: { tx_hash: hash } });
    expect(again.status).toBe(409);
    expect(again.body.type).toBe("/problems/tx_already_used");

    const atCreation = await createClaim(freshAddress(), { tx_hash: hash });
    expect(atCreation.status).toBe(409);
    expect(atCreation.body.type).toBe("/problems/tx_already_used");
  });

  it("refuses a tx below the price, one without a transfer to pay_to, and a reverted one", async () => {
    const { body: claim } = await createClaim(freshAddress());
    const below = await stack.chain.transferUsdc(
      stack.chain.user(0),
      stack.chain.payTo.address,
      9n * USDC,
    );
    const elsewhere = await stack.chain.transferUsdc(
      stack.chain.user(0),
      stack.chain.user(1).address,
      10n * USDC,
    );
    const reverted = await stack.chain.walletFor(stack.chain.user(0)).writeContract({
      address: BASE_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "transfer",
      args: [stack.chain.payTo.address, 10n ** 18n],
      gas: 100_000n,
    });
    await stack.chain.publicClient.waitForTransactionReceipt({ hash: reverted });

    for (const [hash, reason] of [
      [below, "below_price"],
      [elsewhere, "no_transfer_to_pay_to"],
      [reverted, "tx_reverted"],
    ] as const) {
      const response = await stack.api(`/api/claims/${claim.claim_id}/tx`, {
        body: { tx_hash: hash },
      });
      expect(response.status).toBe(422);
      expect(response.body).toMatchObject({ type: "/problems/tx_not_qualifying", reason });
    }
    expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.tx_hash).toBeNull();
  });

  it("refuses a tx hash for a claim that is no longer open", async () => {
    const paid = await stack.chain.transferUsdc(
      stack.chain.user(6),
      stack.chain.payTo.address,
      10n * USDC,
    );
    const { body: claim } = await createClaim(freshAddress(), { tx_hash: paid });
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");

    const other = await stack.chain.transferUsdc(
      stack.chain.user(3),
      stack.chain.payTo.address,
      10n * USDC,
    );
    const response = await stack.api(`/api/claims/${claim.claim_id}/tx`, {
      body: { tx_hash: other },
    });
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({
      type: "/problems/claim_not_open",
      claim_status: "completed",
    });
  });
});
