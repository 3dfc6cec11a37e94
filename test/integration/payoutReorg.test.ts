import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkLedgerFigures } from "../../api/ledger/checkLedgerFigures.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { completeClaims } from "../support/completedClaims.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * A payout is mined, its claim completed and its receipt signed, and then a reorg takes the
 * payout's block away. The service must notice, send the same bytes again, keep paying the
 * claims that follow, and say on receipt verification where the payout stands.
 */

const PAYOUT_CONFIRMATIONS = 3;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    serviceEnv: { PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS) },
  });
});

afterAll(async () => {
  await stack?.stop();
});

async function verify(receipt: { message: string; signature: Hex }) {
  const response = await stack.api<{
    chain: { payout: { state: string; block_number: number | null } };
  }>("/api/receipts/verify", {
    body: { message: receipt.message, signature: receipt.signature },
  });
  return response.body.chain.payout;
}

async function payoutRow(claimId: string) {
  const [row] = await stack.service.sql<
    { tx_hash: Hex; status: string; block_number: bigint | null; final_at: Date | null }[]
  >`select tx_hash, status, block_number, final_at from app.payouts
    where claim_id = ${claimId} and status = 'confirmed'`;
  return row;
}

describe("a payout the chain reorganises away", () => {
  it("is sent again byte for byte, later payouts go on, and verification tells where it stands", async () => {
    const [first] = await completeClaims(stack, [{}]);
    if (!first) throw new Error("fixture missing");
    const receipt = await stack.api<{ message: string; signature: Hex }>(
      `/api/claims/${first.claimId}/receipt`,
    );
    expect(receipt.body.message).toMatch(/^Payout block: \d+$/m);
    const minedIn = (await stack.chain.publicClient.getTransactionReceipt({ hash: first.payoutTx }))
      .blockNumber;

    await stack.untilIndexedHead();
    await stack.chain.testClient.setAutomine(false);
    try {
      const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
      await stack.chain.testClient.request({
        method: "anvil_reorg" as never,
        params: [Number(head - minedIn + 1n), []] as never,
      });
      expect((await verify(receipt.body)).state).toBe("not_found");
      await waitFor(
        async () => {
          const pool = (await stack.chain.testClient.request({
            method: "txpool_content" as never,
            params: [] as never,
          })) as { pending: Record<string, Record<string, { hash: Hex }>> };
          return Object.values(pool.pending).some((byNonce) =>
            Object.values(byNonce).some((tx) => tx.hash === first.payoutTx),
          );
        },
        { what: "the same payout bytes back in the pool" },
      );
    } finally {
      await stack.chain.testClient.setAutomine(true);
    }
    await stack.mine(1);
    await waitFor(async () => (await verify(receipt.body)).state === "on_chain", {
      what: "the payout on chain again",
    });
    expect(await payoutTransfersTo(stack.chain, first.payoutAddress)).toHaveLength(1);

    // The payouts after it are not held up by the gap it left.
    const [second] = await completeClaims(stack, [{}]);
    expect(second?.payoutTx).toBeDefined();

    await waitFor(
      async () => {
        await stack.mine(1);
        return (await payoutRow(first.claimId))?.final_at ?? undefined;
      },
      { what: `the payout ${PAYOUT_CONFIRMATIONS} blocks deep and final` },
    );
    expect((await payoutRow(first.claimId))?.tx_hash).toBe(first.payoutTx);
    // The ledger's figures, kept by triggers through the reorg and the payout mined again, equal a
    // fresh count (doctor's check).
    expect(await checkLedgerFigures(stack.service.sql)).toMatchObject({
      kept: true,
      drifted: [],
      driftedPayees: 0,
    });
  });

  it("says so in health when the payout wallet sends USDC that is not a payout", async () => {
    const health = async () => (await stack.api<{ reasons: string[] }>("/api/health")).body.reasons;
    expect(await health()).not.toContain("payout_wallet_foreign_transfer");
    await stack.chain.walletFor(stack.chain.payout).writeContract({
      address: BASE_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "transfer",
      args: [stack.chain.user(0).address, 1n * USDC],
      gas: 100_000n,
    });
    await stack.mine(PAYOUT_CONFIRMATIONS);
    await waitFor(async () => (await health()).includes("payout_wallet_foreign_transfer"), {
      what: "health to report the foreign transfer",
    });
  });
});
