import { afterAll, beforeAll, expect, it } from "vitest";
import { completeClaims } from "../support/completedClaims.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The attention-check worker in the running service, on Ponder's own finalized block
 * (docs/operating.md#attention-checked-through): a completed payout is passed once its transfers
 * are final, nothing is held, and health's counts stay what they were. What the marks must not
 * miss is in attentionChecked.test.ts.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.stop();
});

it("passes a completed payout once Ponder has finalized its blocks", async () => {
  const [claim] = await completeClaims(stack, [{}]);
  if (!claim) throw new Error("no claim");
  // A claim completes on the service's own receipt of the payout; Ponder may index the payout's
  // transfer a moment later.
  const payout = await waitFor(
    async () => {
      const [row] = await stack.service.sql<{ nonce: string; block: string }[]>`
        select p.nonce::text, o.block_number::text as block from app.payouts p
        join chain.outgoing_transfer o on o.tx_hash = p.tx_hash
        where p.claim_id = ${claim.claimId}`;
      return row;
    },
    { what: "Ponder to index the payout's transfer", timeoutMs: 30_000 },
  );
  const before = await stack.api<{ attention: Record<string, number> }>("/api/health");

  // Ponder finalizes 30 blocks behind its head once its head is 60 past the last finalized block;
  // the payout is final PAYOUT_CONFIRMATIONS (30) blocks deep.
  await stack.mine(100);
  await stack.untilIndexedHead();
  const mark = await waitFor(
    async () => {
      const [row] = await stack.service.sql<{ block: string; nonce: string | null }[]>`
        select transfers_through_block::text as block, payouts_through_nonce::text as nonce
        from app.attention_checked`;
      return row && BigInt(row.block) >= BigInt(payout.block) && row.nonce === payout.nonce
        ? row
        : undefined;
    },
    { what: "the attention check to pass the payout", timeoutMs: 60_000 },
  );
  expect(mark.nonce).toBe(payout.nonce);
  expect(await stack.service.sql`select reason, key from app.attention_held`).toEqual([]);
  const after = await stack.api<{ attention: Record<string, number> }>("/api/health");
  expect(after.body.attention).toEqual(before.body.attention);
  expect(Object.values(after.body.attention).every((count) => count === 0)).toBe(true);
}, 180_000);
