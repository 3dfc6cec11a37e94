import { parseEther } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHealth } from "../../api/health/checkHealth.ts";
import { healthView } from "../../api/health/healthView.ts";
import { readPayoutFunding } from "../../api/payouts/payoutFunding.ts";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { accountWithRole } from "../../scripts/devnet/accounts.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  callDevnetToken,
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

const MIN_ETH = parseEther("0.01");

beforeAll(async () => {
  ({ chain, database } = chainWithDatabase = await startChainWithDatabase());
  harness = await createPayoutHarness(chain, database.url, { PAYOUT_MIN_ETH: "0.01" });
});

afterAll(async () => {
  await harness?.stop();
  await chainWithDatabase?.stop();
});

async function health() {
  const report = await checkHealth({
    sql: harness.sql,
    chain: harness.deps.chain,
    chainId: 8453,
    maxIndexerLagBlocks: 10,
    payoutFunding: () => readPayoutFunding(harness.deps),
  });
  return healthView(report);
}

async function usdcBalance() {
  return chain.publicClient.readContract({
    address: harness.config.chain.usdcAddress,
    abi: usdcAbi,
    functionName: "balanceOf",
    args: [chain.payout.address],
  });
}

/** Runs worker rounds until `done` holds; the test knows each round really ran. */
function roundsUntil(done: () => Promise<boolean>, what: string) {
  return waitFor(
    async () => {
      await harness.round();
      return done();
    },
    { what },
  );
}

async function statusesOf(claims: PaidClaim[]) {
  const statuses = await claimStatuses(
    harness.sql,
    claims.map((claim) => claim.id),
  );
  return claims.map((claim) => statuses.get(claim.id));
}

describe("payout wallet funding", () => {
  it("signs only what the USDC covers, counting payouts not mined yet, and resumes once funded", async () => {
    // The wallet itself sends all but 2 USDC away: also a nonce the database never saw.
    const deployer = accountWithRole(chain.accounts, "deployer");
    await chain.transferUsdc(chain.payout, deployer.address, (await usdcBalance()) - 2_000_000n);

    await chain.testClient.setAutomine(false);
    const claims = await createPaidClaims(harness.sql, 3);
    await harness.round();
    const first = await payoutRows(harness.sql);
    expect(first.map((payout) => payout.claim_id)).toEqual([claims[0]?.id, claims[1]?.id]);
    // Nonce 0 went to the wallet's own transfer: the chain's pending nonce wins.
    expect(first.map((payout) => payout.nonce)).toEqual([1n, 2n]);

    // 2 USDC still on chain, but both are owed to the pooled payouts: nothing more is signed.
    await harness.round();
    await harness.round();
    expect(await payoutRows(harness.sql)).toHaveLength(2);
    expect(await statusesOf(claims)).toEqual(["paying", "paying", "paid"]);
    let report = await health();
    expect(report.status).toBe("degraded");
    expect(report.reasons).toContain("payout_wallet_low_usdc");
    expect(report.payouts).toMatchObject({
      ok: false,
      wallet: chain.payout.address,
      usdc_balance: "2.000000",
      claims_paid: 1,
      payouts_unfinished: 2,
    });

    await chain.testClient.mine({ blocks: 1 });
    await chain.testClient.setAutomine(true);
    await roundsUntil(
      async () =>
        (await statusesOf(claims)).filter((status) => status === "completed").length === 2,
      "the two covered claims to complete",
    );
    await harness.round();
    expect(await statusesOf(claims)).toEqual(["completed", "completed", "paid"]);
    expect(await payoutRows(harness.sql)).toHaveLength(2);
    report = await health();
    expect(report.reasons).toContain("payout_wallet_low_usdc");
    expect(report.payouts).toMatchObject({ usdc_balance: "0.000000", payouts_unfinished: 0 });

    await callDevnetToken(chain, {
      functionName: "mint",
      args: [chain.payout.address, 5_000_000n],
    });
    await roundsUntil(
      async () => (await statusesOf(claims)).every((status) => status === "completed"),
      "the last claim to complete once funded",
    );
    report = await health();
    expect(report.reasons).not.toContain("payout_wallet_low_usdc");
    expect(report.payouts).toMatchObject({ ok: true, usdc_balance: "4.000000", claims_paid: 0 });

    const counts = countByRecipient(await payoutTransfers(chain));
    for (const claim of claims) expect(counts.get(claim.payoutAddress)).toBe(1);
  });

  it("covers each payout's gas at the settle-and-pay limit, the dearer of the two", async () => {
    const settleAndPay = harness.config.x402.settleAndPay;
    expect(settleAndPay?.gasLimit).toBeGreaterThan(harness.config.payouts.gasLimit);
    const funding = await readPayoutFunding(harness.deps);
    expect(funding.gasCostPerPayout).toBe(
      (settleAndPay?.gasLimit ?? 0n) * funding.fees.maxFeePerGas,
    );
    const spendable = funding.ethBalance - MIN_ETH;
    expect(funding.coveredByEth).toBe(
      Number(spendable / funding.gasCostPerPayout) - funding.outstandingPayouts,
    );
  });

  it("waits in paid while the wallet lacks ETH for gas above the minimum", async () => {
    const ethBefore = await chain.publicClient.getBalance({ address: chain.payout.address });
    await chain.testClient.setBalance({ address: chain.payout.address, value: MIN_ETH + 1000n });
    const claims = await createPaidClaims(harness.sql, 2);

    const rowsBefore = (await payoutRows(harness.sql)).length;
    await harness.round();
    await harness.round();
    expect(await payoutRows(harness.sql)).toHaveLength(rowsBefore);
    expect(await statusesOf(claims)).toEqual(["paid", "paid"]);
    const report = await health();
    expect(report.reasons).toContain("payout_wallet_low_eth");
    expect(report.reasons).not.toContain("payout_wallet_low_usdc");
    expect(report.payouts?.ok).toBe(false);

    await chain.testClient.setBalance({ address: chain.payout.address, value: ethBefore });
    await roundsUntil(
      async () => (await statusesOf(claims)).every((status) => status === "completed"),
      "the claims to complete once the wallet has gas money",
    );
    expect((await health()).reasons).not.toContain("payout_wallet_low_eth");
    const counts = countByRecipient(await payoutTransfers(chain));
    for (const claim of claims) expect(counts.get(claim.payoutAddress)).toBe(1);
  });
});
