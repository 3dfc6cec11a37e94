import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevnetAccount } from "../../scripts/devnet/accounts.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic, USDC } from "../support/usdc.ts";

/**
 * Variant A end to end on Anvil + Ponder + PostgreSQL: exact amount from any wallet, at least
 * the price from the payout address, and what happens to every other transfer.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A" } });
});

afterAll(async () => {
  await stack?.stop();
});

const createClaim = (payoutAddress: Address, extra: Record<string, string> = {}) =>
  stack.createClaim(payoutAddress, extra);

async function claimStatus(claimId: string) {
  return (await stack.api(`/api/claims/${claimId}`)).body as Record<string, unknown> & {
    status: string;
  };
}

async function payAndConfirm(from: DevnetAccount, amount: bigint) {
  const hash = await stack.chain.transferUsdc(from, stack.chain.payTo.address, amount);
  await stack.mine(2);
  return hash;
}

describe("variant A matching", () => {
  it("pays a claim from any wallet that sends exactly its amount_due", async () => {
    const holder = stack.chain.user(0);
    const claim = await createClaim(holder.address);

    const hash = await payAndConfirm(stack.chain.user(1), atomic(claim.amount_due_usdc));

    const completed = await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(completed.payment).toMatchObject({
      tx_hash: hash,
      matched_by: "amount",
      amount_usdc: claim.amount_due_usdc,
    });
    expect(await payoutTransfersTo(stack.chain, holder.address)).toHaveLength(1);
  });

  it("waits for the confirmations before matching", async () => {
    const claim = await createClaim(stack.chain.user(2).address);
    const hash = await stack.chain.transferUsdc(
      stack.chain.user(3),
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    // The transfer is indexed at once but has no blocks on top: it must not be matched yet.
    await stack.untilTransferState(hash, "awaiting_confirmations");
    expect((await claimStatus(claim.claim_id)).status).toBe("awaiting_payment");

    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
  });

  it("pays a claim from its payout address with at least the price, once for an overpayment", async () => {
    const holder = stack.chain.user(4);
    const claim = await createClaim(holder.address);

    await payAndConfirm(holder, 15n * USDC);

    const completed = await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(completed.payment).toMatchObject({ matched_by: "sender", amount_usdc: "15.000000" });
    const payouts = await payoutTransfersTo(stack.chain, holder.address);
    expect(payouts.map((transfer) => transfer.value)).toEqual([USDC]);
  });

  it("pays two claims of one payout address with two payments, oldest claim first", async () => {
    const holder = stack.chain.user(5);
    const older = await createClaim(holder.address, { agent_name: "older" });
    const newer = await createClaim(holder.address, { agent_name: "newer" });

    const first = await payAndConfirm(holder, 10n * USDC);
    const firstDone = await stack.untilClaimStatus(older.claim_id, "completed");
    expect((firstDone.payment as { tx_hash: string }).tx_hash).toBe(first);
    expect((await claimStatus(newer.claim_id)).status).toBe("awaiting_payment");

    const second = await payAndConfirm(holder, 10n * USDC);
    const secondDone = await stack.untilClaimStatus(newer.claim_id, "completed");
    expect((secondDone.payment as { tx_hash: string }).tx_hash).toBe(second);
    expect(await payoutTransfersTo(stack.chain, holder.address)).toHaveLength(2);
  });

  it("pays nothing for a transfer below the price, and says so", async () => {
    const holder = stack.chain.user(6);
    const claim = await createClaim(holder.address);

    const hash = await payAndConfirm(holder, 5n * USDC);

    const explanation = await stack.untilTransferState(hash, "unmatched");
    expect(explanation).toMatchObject({
      reason: "below_price",
      claim_id: null,
      amount_usdc: "5.000000",
    });
    expect((await claimStatus(claim.claim_id)).status).toBe("awaiting_payment");
    expect(await payoutTransfersTo(stack.chain, holder.address)).toHaveLength(0);
  });

  it("pays nothing for a transfer of another amount from another wallet", async () => {
    const claim = await createClaim(stack.chain.user(0).address);
    const hash = await payAndConfirm(stack.chain.user(1), atomic(claim.amount_due_usdc) + 1n);

    const response = await stack.untilTransferState(hash, "unmatched");
    expect(response.reason).toBe("no_matching_claim");
    expect((await claimStatus(claim.claim_id)).status).toBe("awaiting_payment");
  });
});
