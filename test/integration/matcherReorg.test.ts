import { type Hex, keccak256 } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { createLogger } from "../../api/logger.ts";
import { matchNextBatch } from "../../api/matcher/matchNextBatch.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import type { RunningPonder } from "../../scripts/devnet/ponder.ts";
import { startTestIndexer } from "../support/indexer.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic, USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The last look before the irreversible step: a payment the indexer still shows but the chain
 * no longer has (reorged away while the indexer was behind) must never pay a claim.
 */

let stack: Stack;
const restartedIndexers: RunningPonder[] = [];

beforeAll(async () => {
  // The service's own workers stay off; this test drives the matcher by hand.
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A", ROLE: "api" } });
});

afterAll(async () => {
  for (const indexer of restartedIndexers) await indexer.stop();
  await stack?.stop();
});

function matcherDeps() {
  return {
    sql: stack.service.sql,
    chain: createChainReader(stack.chain.rpcUrl, 8453),
    config: stack.service.config,
    logger: createLogger("silent"),
  };
}

/** A signed USDC transfer, to be put into a block by anvil_reorg. */

describe("the matcher's receipt re-check", () => {
  it("refuses a payment the indexer shows but the chain reorged away", async () => {
    const payer = stack.chain.users[0];
    if (!payer) throw new Error("no user");
    const created = await stack.api<{
      claim_id: string;
      amount_due_usdc: string;
      payout_address: `0x${string}`;
    }>("/api/claims", { body: { payout_address: stack.chain.users[1]?.address } });
    const amount = BigInt(created.body.amount_due_usdc.replace(".", ""));
    const hash = await stack.chain.transferUsdc(payer, stack.chain.payTo.address, amount);
    await stack.untilTransferState(hash, "awaiting_confirmations");

    // The indexer stops before it can see the reorg: its row for the payment stays.
    await stack.ponder.stop();
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [1, []] as never,
    });
    await stack.chain.testClient.mine({ blocks: 3 });
    const [row] = await stack.service
      .sql`select 1 from chain.incoming_transfer where tx_hash = ${hash}`;
    expect(row).toBeDefined();

    const deps = {
      sql: stack.service.sql,
      chain: createChainReader(stack.chain.rpcUrl, 8453),
      config: stack.service.config,
      logger: createLogger("silent"),
    };
    const result = await matchNextBatch(deps);

    expect(result).toMatchObject({ processed: 0, matched: 0 });
    expect((await stack.api(`/api/claims/${created.body.claim_id}`)).body.status).toBe(
      "awaiting_payment",
    );
    const [payment] = await stack.service.sql`select 1 from app.payments where tx_hash = ${hash}`;
    expect(payment).toBeUndefined();
    expect(await payoutTransfersTo(stack.chain, created.body.payout_address)).toHaveLength(0);
  });

  it("does not move its cursor past transfers of a block the chain no longer has", async () => {
    // The test before stopped the stack's indexer: this one runs its own.
    const indexer = await startTestIndexer(stack.chain, stack.database.url);
    restartedIndexers.push(indexer);
    const holder = stack.chain.user(6).address;
    const created = await stack.createClaim(holder);

    // Block B: two transfers below the price (nothing to re-check: they pay nobody).
    await stack.chain.testClient.setAutomine(false);
    const senders = [stack.chain.user(3), stack.chain.user(4)];
    const hashes = await Promise.all(
      senders.map((sender) =>
        stack.chain.walletFor(sender).writeContract({
          address: BASE_USDC_ADDRESS,
          abi: usdcAbi,
          functionName: "transfer",
          args: [stack.chain.payTo.address, 1n * USDC],
          gas: 100_000n,
        }),
      ),
    );
    await stack.mine(1);
    await stack.chain.testClient.setAutomine(true);
    await stack.untilTransferState(hashes[1] as Hex, "awaiting_confirmations");

    // The indexer stops before the reorg: it keeps B's rows. The new block at B's height holds
    // the claim's payment at a lower log index than the cursor would reach in B.
    await indexer.stop();
    const payment = await stack.chain.signedUsdcTransfer(
      stack.chain.user(5),
      stack.chain.payTo.address,
      atomic(created.amount_due_usdc),
    );
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [1, [[payment, 0]]] as never,
    });
    await stack.mine(3);

    const stale = await matchNextBatch(matcherDeps());
    expect(stale.processed).toBe(0);

    restartedIndexers.push(await startTestIndexer(stack.chain, stack.database.url));
    // On the node's WebSocket, Ponder indexes the unfinalized blocks once the next head comes
    // (docs/traps.md#ponder).
    await stack.mine(1);
    await stack.untilTransferState(keccak256(payment), "awaiting_confirmations");
    await waitFor(async () => (await matchNextBatch(matcherDeps())).matched > 0 || undefined, {
      what: "the matcher to match the payment in the new block",
    });
    expect((await stack.api(`/api/claims/${created.claim_id}`)).body.status).toBe("paid");
  });
});
