import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { createLogger } from "../../api/logger.ts";
import { matchNextBatch } from "../../api/matcher/matchNextBatch.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";

/**
 * The last look before the irreversible step: a payment the indexer still shows but the chain
 * no longer has (reorged away while the indexer was behind) must never pay a claim.
 */

let stack: Stack;

beforeAll(async () => {
  // The service's own workers stay off; this test drives the matcher by hand.
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A", ROLE: "api" } });
});

afterAll(async () => {
  await stack?.stop();
});

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
});
