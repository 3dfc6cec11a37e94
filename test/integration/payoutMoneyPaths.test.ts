import { erc20Abi, type Hex, maxUint256 } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCore } from "../../api/core/createCore.ts";
import { checkHealth, serviceHealthDependencies } from "../../api/health/checkHealth.ts";
import { serviceMetrics } from "../../api/metrics/serviceMetrics.ts";
import { readPayoutFunding } from "../../api/payouts/payoutFunding.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole } from "../../scripts/devnet/accounts.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import { runCli } from "../support/cliProcess.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  callDevnetToken,
  claimStatuses,
  createPaidClaims,
  createPayoutHarness,
  type PaidClaim,
  payoutTransfersTo,
} from "../support/payouts.ts";
import { startRpcProxy } from "../support/rpcProxy.ts";
import { testServiceEnv } from "../support/service.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Payouts that revert for a reason that passes, nonces someone else used or left empty: the
 * payout wallet's nonce sequence must never stall for good, and a claim is paid exactly once.
 * The payout workers are driven tick by tick; automine is off, blocks are mined by the test.
 */

const PAYOUT_CONFIRMATIONS = 2;
let chain: TestChain;
let database: TestDatabase;
let chainWithDatabase: ChainWithDatabase | undefined;
let harness: Awaited<ReturnType<typeof createPayoutHarness>>;
const settings = {
  PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS),
  PAYOUT_NONCE_GAP_SECONDS: "1",
  PAYOUT_FOREIGN_NONCE_GRACE_SECONDS: "0",
};

beforeAll(async () => {
  ({ chain, database } = chainWithDatabase = await startChainWithDatabase());
  harness = await createPayoutHarness(chain, database.url, settings);
  await chain.testClient.setAutomine(false);
});

afterAll(async () => {
  await harness?.stop();
  await chainWithDatabase?.stop();
});

async function statusOf(claim: PaidClaim) {
  return (await claimStatuses(harness.sql, [claim.id])).get(claim.id);
}

/** Worker rounds, a block mined after each, until the claim has `status`. */
function roundsUntil(claim: PaidClaim, status: string, what = `claim to be ${status}`) {
  return waitFor(
    async () => {
      await harness.round();
      await chain.testClient.mine({ blocks: 1 });
      await harness.confirmer.tick();
      return (await statusOf(claim)) === status;
    },
    { what, timeoutMs: 30_000, intervalMs: 100 },
  );
}

async function withAutomine<T>(work: () => Promise<T>): Promise<T> {
  await chain.testClient.setAutomine(true);
  try {
    return await work();
  } finally {
    await chain.testClient.setAutomine(false);
  }
}

async function payoutsOf(claim: PaidClaim) {
  return harness.sql<{ nonce: bigint; status: string; tx_hash: Hex }[]>`
    select nonce, status, tx_hash from app.payouts where claim_id = ${claim.id} order by nonce`;
}

function selfTransferAt(nonce: bigint, feeMultiplier = 1n) {
  return chain.walletFor(chain.payout).sendTransaction({
    to: accountWithRole(chain.accounts, "deployer").address,
    value: 1n,
    nonce: Number(nonce),
    gas: 21_000n,
    maxFeePerGas: 10_000_000_000n * feeMultiplier,
    maxPriorityFeePerGas: 1_000_000_000n * feeMultiplier,
  });
}

function pendingNonce(): Promise<bigint> {
  return chain.publicClient
    .getTransactionCount({ address: chain.payout.address, blockTag: "pending" })
    .then(BigInt);
}

describe("a payout that reverts for a reason that passes", () => {
  it("keeps the claim paying, and pays it with a new payout once the reverted one is final", async () => {
    // Someone who can draw on the payout wallet (an allowance given long ago) empties it while
    // two payouts wait in the pool: the second reverts for want of USDC.
    const drawer = chain.user(0);
    await withAutomine(() =>
      chain.walletFor(chain.payout).writeContract({
        address: BASE_USDC_ADDRESS,
        abi: erc20Abi,
        functionName: "approve",
        args: [drawer.address, maxUint256],
        gas: 100_000n,
      }),
    );
    await chain.testClient.mine({ blocks: 1 });
    const [first, second] = await createPaidClaims(harness.sql, 2);
    if (!first || !second) throw new Error("fixture missing");
    await harness.sender.tick();
    const balance = await chain.usdcBalance(chain.payout.address);
    await chain.walletFor(drawer).writeContract({
      address: BASE_USDC_ADDRESS,
      abi: erc20Abi,
      functionName: "transferFrom",
      args: [chain.payout.address, drawer.address, balance - 1n * USDC],
      gas: 100_000n,
      maxFeePerGas: 50_000_000_000n,
      maxPriorityFeePerGas: 20_000_000_000n,
    });
    await chain.testClient.mine({ blocks: 1 });
    await harness.confirmer.tick();

    expect(await statusOf(first)).toBe("completed");
    expect(await statusOf(second)).toBe("paying");
    expect((await payoutsOf(second)).map((payout) => payout.status)).toEqual(["reverted"]);

    // Not yet final: nothing new is signed for it, even with the wallet funded again.
    await withAutomine(() =>
      callDevnetToken(chain, { functionName: "mint", args: [chain.payout.address, 100n * USDC] }),
    );
    await harness.sender.tick();
    expect(await payoutsOf(second)).toHaveLength(1);

    await roundsUntil(second, "completed");
    const payouts = await payoutsOf(second);
    expect(payouts.map((payout) => payout.status)).toEqual(["reverted", "confirmed"]);
    expect(await payoutTransfersTo(chain, second.payoutAddress)).toHaveLength(1);
  });

  it("reads the wallet's balances and nonce at one block", async () => {
    const proxy = await startRpcProxy(chain.rpcUrl);
    const proxied = await createPayoutHarness(chain, database.url, {
      ...settings,
      RPC_URL: proxy.url,
    });
    try {
      await readPayoutFunding({ ...proxied.deps, chain: proxied.deps.chain });
      const blockTags = proxy.calls
        .filter((call) =>
          ["eth_call", "eth_getBalance", "eth_getTransactionCount"].includes(call.method),
        )
        .map((call) => call.params.at(-1));
      expect(blockTags).toHaveLength(3);
      expect(new Set(blockTags).size).toBe(1);
      expect(blockTags[0]).toMatch(/^0x[0-9a-f]+$/);
    } finally {
      await proxied.stop();
      await proxy.stop();
    }
  });
});

describe("nonces someone else used or left empty", () => {
  it("fills a nonce gap it did not create with a zero-value transaction to itself", async () => {
    // Another process with the key sends a transaction that never makes it: the payout signed
    // after it waits behind an empty nonce.
    const gap = await pendingNonce();
    const foreign = await selfTransferAt(gap);
    const [claim] = await createPaidClaims(harness.sql, 1);
    if (!claim) throw new Error("fixture missing");
    await harness.sender.tick();
    expect((await payoutsOf(claim))[0]?.nonce).toBe(gap + 1n);
    await chain.testClient.dropTransaction({ hash: foreign });

    await roundsUntil(claim, "completed", "the gap to be filled and the payout mined");
    const [filler] = await harness.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.nonce_fillers where nonce = ${gap}`;
    if (!filler) throw new Error("no filler recorded");
    const filled = await chain.publicClient.getTransaction({ hash: filler.tx_hash });
    expect(filled).toMatchObject({
      from: chain.payout.address.toLowerCase(),
      to: chain.payout.address.toLowerCase(),
      value: 0n,
      nonce: Number(gap),
    });
    expect(await payoutTransfersTo(chain, claim.payoutAddress)).toHaveLength(1);
  });

  it("surfaces a payout whose nonce a foreign transaction took, and re-issues it once on an operator's command", async () => {
    const [claim] = await createPaidClaims(harness.sql, 1);
    if (!claim) throw new Error("fixture missing");
    await harness.sender.tick();
    const [payout] = await payoutsOf(claim);
    if (!payout) throw new Error("payout missing");
    await selfTransferAt(payout.nonce, 20n);
    await chain.testClient.mine({ blocks: 1 });
    for (let round = 0; round < 3; round += 1) await harness.round();

    const report = await checkHealth(serviceHealthDependencies(harness.deps));
    expect(report.reasons).toContain("payout_nonce_taken");
    const exposition = await serviceMetrics({
      ...harness.deps,
      core: createCore(harness.deps, null),
    }).render();
    expect(exposition).toMatch(/pay_and_earn_needing_attention\{reason="payout_nonce_taken"\} 1/);

    const env = testServiceEnv(chain, database.url, settings);
    const reissue = () =>
      runCli(["reissue-payout", claim.id], env).then((run) => ({
        code: run.code,
        output: run.stdout + run.stderr,
      }));

    // The foreign transaction is not final yet: a reorg could still bring ours back.
    const early = await reissue();
    expect(early.code).not.toBe(0);
    expect(early.output).toMatch(/not final/i);

    await chain.testClient.mine({ blocks: PAYOUT_CONFIRMATIONS });
    const done = await reissue();
    expect(done.code, done.output).toBe(0);
    expect(done.output).toMatch(/re-issued/i);
    await roundsUntil(claim, "completed");
    expect(await payoutTransfersTo(chain, claim.payoutAddress)).toHaveLength(1);
    const rows = await payoutsOf(claim);
    expect(rows.map((row) => row.status)).toEqual(["abandoned", "confirmed"]);

    const twice = await reissue();
    expect(twice.code).not.toBe(0);
    expect(twice.output).toMatch(/already|not waiting/i);
    const healed = await checkHealth(serviceHealthDependencies(harness.deps));
    expect(healed.reasons).not.toContain("payout_nonce_taken");
    // Three CLI runs, each a process start that took over 30 s in a whole run on a slow VM.
  }, 400_000);
});
