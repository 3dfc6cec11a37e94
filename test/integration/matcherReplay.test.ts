import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The matcher run again over transfers it already decided (a cursor lost or rewound, a
 * restored backup): nothing is decided twice, no claim is paid twice, nothing is paid out
 * again.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A" } });
});

afterAll(async () => {
  await stack?.stop();
});

async function counts() {
  const [row] = await stack.service.sql<{ payments: number; unmatched: number; payouts: number }[]>`
    select (select count(*)::int from app.payments) as payments,
      (select count(*)::int from app.unmatched_transfers) as unmatched,
      (select count(*)::int from app.payouts) as payouts`;
  return row;
}

describe("the matcher over transfers it already decided", () => {
  it("decides nothing twice and pays nothing out again", async () => {
    const payer = stack.chain.users[0];
    if (!payer) throw new Error("no user");
    const holders = [1, 2, 3].map(() => privateKeyToAccount(generatePrivateKey()).address);
    const claims = [];
    for (const holder of holders) {
      const created = await stack.api<{ claim_id: string; amount_due_usdc: string }>(
        "/api/claims",
        {
          body: { payout_address: holder },
        },
      );
      claims.push(created.body);
      await stack.chain.transferUsdc(
        payer,
        stack.chain.payTo.address,
        BigInt(created.body.amount_due_usdc.replace(".", "")),
      );
    }
    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, 3n * USDC);
    await stack.mine(2);
    for (const claim of claims) await stack.untilClaimStatus(claim.claim_id, "completed");
    // The stray 3 USDC transfer is mined after the claims' payments, so the claims can
    // complete before the matcher reaches its block: wait until it is decided too.
    await waitFor(async () => ((await counts())?.unmatched ?? 0) >= 1, {
      what: "the stray transfer to be recorded as unmatched",
    });
    const decided = await counts();
    expect(decided).toMatchObject({ payments: 3, payouts: 3 });

    const [cursor] = await stack.service.sql<{ block_number: bigint; log_index: number }[]>`
      select block_number, log_index from app.matcher_cursor`;

    // Rewind: the running matcher goes over every transfer again.
    await stack.service.sql`update app.matcher_cursor set block_number = -1, log_index = -1`;
    await waitFor(
      async () => {
        const [now] = await stack.service.sql<{ block_number: bigint; log_index: number }[]>`
        select block_number, log_index from app.matcher_cursor`;
        return now?.block_number === cursor?.block_number && now?.log_index === cursor?.log_index;
      },
      { what: "the matcher to reach its old cursor again" },
    );

    expect(await counts()).toEqual(decided);
    for (const holder of holders)
      expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });
});
