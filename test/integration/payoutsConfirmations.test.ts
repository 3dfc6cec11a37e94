import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountWithRole } from "../../scripts/devnet/accounts.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  claimStatuses,
  countByRecipient,
  createPaidClaims,
  createPayoutHarness,
  type PaidClaim,
  payoutRows,
  payoutTransfers,
} from "../support/payouts.ts";
import { waitFor } from "../support/waitFor.ts";

let chain: TestChain;
let database: TestDatabase;
let chainWithDatabase: ChainWithDatabase | undefined;
let harness: Awaited<ReturnType<typeof createPayoutHarness>>;

beforeAll(async () => {
  ({ chain, database } = chainWithDatabase = await startChainWithDatabase());
  // Payment confirmations do not apply to payouts: a mined payout completes its claim at once.
  harness = await createPayoutHarness(chain, database.url, { CONFIRMATIONS: "3" });
  await chain.testClient.setAutomine(false);
});

afterAll(async () => {
  await harness?.stop();
  await chainWithDatabase?.stop();
});

async function statusesOf(claims: PaidClaim[]) {
  const statuses = await claimStatuses(
    harness.sql,
    claims.map((claim) => claim.id),
  );
  return claims.map((claim) => statuses.get(claim.id));
}

async function payoutsOf(claims: PaidClaim[]) {
  const ids = new Set(claims.map((claim) => claim.id));
  return (await payoutRows(harness.sql)).filter((payout) => ids.has(payout.claim_id));
}

/** Rounds until every claim has `status` (other workers' rounds are the test's own). */
function roundsUntilStatus(claims: PaidClaim[], status: string) {
  return waitFor(
    async () => {
      await harness.round();
      return (await statusesOf(claims)).every((current) => current === status);
    },
    { what: `claims to be ${status}` },
  );
}

describe("payout confirmation and nonces", () => {
  it("completes a claim in the round after its payout is mined, with no blocks on top", async () => {
    const claims = await createPaidClaims(harness.sql, 2);
    await harness.round();
    expect(await statusesOf(claims)).toEqual(["paying", "paying"]);
    await chain.testClient.mine({ blocks: 1 });
    const minedIn = await chain.publicClient.getBlockNumber();
    await harness.confirmer.tick();
    expect(await statusesOf(claims)).toEqual(["completed", "completed"]);
    const payouts = await payoutsOf(claims);
    expect(payouts.map((payout) => payout.status)).toEqual(["confirmed", "confirmed"]);
    const [row] = await harness.sql<{ block_number: bigint }[]>`
      select block_number from app.payouts where claim_id = ${claims[0]?.id as string}`;
    expect(row?.block_number).toBe(minedIn);
  });

  it("never re-signs a payout whose nonce a foreign transaction used; later payouts go on", async () => {
    const [stranded] = await createPaidClaims(harness.sql, 1);
    if (!stranded) throw new Error("fixture missing");
    await harness.round();
    const [payout] = await payoutsOf([stranded]);
    const [attempt] = await harness.sql<{ max_fee_per_gas: string; tx_hash: Hex }[]>`
      select max_fee_per_gas, tx_hash from app.payout_attempts where claim_id = ${stranded.id}`;
    if (!payout || !attempt) throw new Error("payout missing");

    // Someone else with the key takes the same nonce at a higher fee, replacing ours in the pool.
    const fee = BigInt(attempt.max_fee_per_gas) * 2n;
    await chain.walletFor(chain.payout).sendTransaction({
      to: accountWithRole(chain.accounts, "deployer").address,
      value: 1n,
      nonce: Number(payout.nonce),
      gas: 21_000n,
      maxFeePerGas: fee,
      maxPriorityFeePerGas: fee,
    });
    await chain.testClient.mine({ blocks: 1 });
    for (let round = 0; round < 4; round += 1) await harness.round();

    expect(await statusesOf([stranded])).toEqual(["paying"]);
    const [after] = await payoutsOf([stranded]);
    expect(after).toMatchObject({ nonce: payout.nonce, tx_hash: attempt.tx_hash });
    const attempts = await harness.sql`
      select 1 from app.payout_attempts where claim_id = ${stranded.id}`;
    expect(attempts).toHaveLength(1);
    expect(countByRecipient(await payoutTransfers(chain)).get(stranded.payoutAddress)).toBe(
      undefined,
    );

    const [next] = await createPaidClaims(harness.sql, 1);
    if (!next) throw new Error("fixture missing");
    await harness.round();
    await chain.testClient.mine({ blocks: 1 });
    await roundsUntilStatus([next], "completed");
    const [nextPayout] = await payoutsOf([next]);
    expect(nextPayout?.nonce).toBe(payout.nonce + 1n);
    expect(await statusesOf([stranded])).toEqual(["paying"]);
  });

  it("takes the nonce after every stored payout, even one the node has lost", async () => {
    const [lost] = await createPaidClaims(harness.sql, 1);
    if (!lost) throw new Error("fixture missing");
    await harness.sender.tick();
    const [lostPayout] = await payoutsOf([lost]);
    if (!lostPayout) throw new Error("payout missing");
    await chain.testClient.dropTransaction({ hash: lostPayout.tx_hash });
    const pending = await chain.publicClient.getTransactionCount({
      address: chain.payout.address,
      blockTag: "pending",
    });
    expect(BigInt(pending)).toBe(lostPayout.nonce);

    // The chain's pending count alone would hand out the lost payout's nonce again.
    const [next] = await createPaidClaims(harness.sql, 1);
    if (!next) throw new Error("fixture missing");
    await harness.sender.tick();
    const [nextPayout] = await payoutsOf([next]);
    expect(nextPayout?.nonce).toBe(lostPayout.nonce + 1n);
  });
});
