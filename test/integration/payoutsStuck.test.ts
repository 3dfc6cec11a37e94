import type { Hex } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../api/db/connect.ts";
import type { RunningService } from "../../api/service.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  countByRecipient,
  createPaidClaims,
  type PaidClaim,
  payoutTransfers,
  waitForStatus,
} from "../support/payouts.ts";
import { startTestService } from "../support/service.ts";
import { waitFor } from "../support/waitFor.ts";

let chain: TestChain;
let database: TestDatabase;
let sql: Database;
let chainWithDatabase: ChainWithDatabase | undefined;
let service: RunningService | undefined;

beforeAll(async () => {
  ({ chain, database, sql } = chainWithDatabase = await startChainWithDatabase());
});

afterEach(async () => {
  await service?.stop();
  service = undefined;
  await chain.testClient.setAutomine(true);
});

afterAll(async () => {
  await chainWithDatabase?.stop();
});

/** The service on a chain that mines only when the test says so. */
async function startManualMining(overrides: Record<string, string>) {
  await chain.testClient.setAutomine(false);
  service = await startTestService(chain, database.url, {
    PAYOUT_INTERVAL_MS: "50",
    ...overrides,
  });
}

interface Attempt {
  tx_hash: Hex;
  nonce: bigint;
  max_fee_per_gas: string;
}

async function attemptsOf(claim: PaidClaim): Promise<Attempt[]> {
  return sql<Attempt[]>`
    select tx_hash, nonce, max_fee_per_gas from app.payout_attempts
    where claim_id = ${claim.id} order by created_at`;
}

async function payoutOf(claim: PaidClaim) {
  const [payout] = await sql<{ status: string; tx_hash: Hex; broadcasts: number }[]>`
    select status, tx_hash, broadcasts from app.payouts where claim_id = ${claim.id}`;
  return payout;
}

const isPooled = (hash: Hex) =>
  chain.publicClient.getTransaction({ hash }).then(
    (transaction) => transaction.blockNumber === null,
    () => false,
  );

async function expectPaidOnceBy(claim: PaidClaim, hash: Hex) {
  await waitForStatus(sql, [claim.id], "completed");
  const transfers = await payoutTransfers(chain);
  expect(countByRecipient(transfers).get(claim.payoutAddress)).toBe(1);
  expect(transfers.find((transfer) => transfer.to === claim.payoutAddress)?.txHash).toBe(hash);
  expect((await payoutOf(claim))?.tx_hash).toBe(hash);
}

describe("payouts that do not get mined", () => {
  it("re-broadcasts a dropped transaction byte for byte (same hash) until it is mined", async () => {
    await startManualMining({ PAYOUT_REBROADCAST_SECONDS: "1", PAYOUT_REPLACE_SECONDS: "600" });
    const [claim] = await createPaidClaims(sql, 1);
    if (!claim) throw new Error("fixture missing");
    const sent = await waitFor(async () => {
      const payout = await payoutOf(claim);
      return payout?.status === "broadcast" ? payout : undefined;
    });
    expect(await isPooled(sent.tx_hash)).toBe(true);

    await chain.testClient.dropTransaction({ hash: sent.tx_hash });
    expect(await isPooled(sent.tx_hash)).toBe(false);
    await waitFor(() => isPooled(sent.tx_hash), { what: "the dropped payout to be re-sent" });
    await chain.testClient.mine({ blocks: 1 });

    await expectPaidOnceBy(claim, sent.tx_hash);
    expect(await attemptsOf(claim)).toHaveLength(1);
    expect((await payoutOf(claim))?.broadcasts).toBeGreaterThanOrEqual(2);
  });

  it("replaces a payout priced out by the base fee with the same nonce and higher fees", async () => {
    await startManualMining({
      PAYOUT_REBROADCAST_SECONDS: "1",
      PAYOUT_REPLACE_SECONDS: "2",
      PAYOUT_MAX_FEE_GWEI: "1000",
    });
    const [claim] = await createPaidClaims(sql, 1);
    if (!claim) throw new Error("fixture missing");
    const first = await waitFor(async () =>
      (await payoutOf(claim))?.status === "broadcast" ? (await attemptsOf(claim))[0] : undefined,
    );
    const firstFee = BigInt(first.max_fee_per_gas);

    // The next block's base fee far above what the payout pays: it cannot be mined (and Anvil
    // evicts it from its pool when that block is mined; a real node would keep it waiting).
    await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: firstFee * 50n });
    await chain.testClient.mine({ blocks: 1 });
    expect(await isPooled(first.tx_hash)).toBe(false);

    const replacement = await waitFor(
      async () => {
        const attempts = await attemptsOf(claim);
        const latest = attempts.at(-1);
        return attempts.length >= 2 && latest && (await isPooled(latest.tx_hash))
          ? latest
          : undefined;
      },
      { what: "a pooled replacement" },
    );
    await chain.testClient.mine({ blocks: 1 });
    await expectPaidOnceBy(claim, replacement.tx_hash);

    const attempts = await attemptsOf(claim);
    expect(new Set(attempts.map((attempt) => attempt.nonce)).size).toBe(1);
    expect(BigInt(replacement.max_fee_per_gas)).toBeGreaterThanOrEqual((firstFee * 125n) / 100n);
    expect(BigInt(replacement.max_fee_per_gas)).toBeGreaterThanOrEqual(firstFee * 50n);
    await expect(
      chain.publicClient.getTransactionReceipt({ hash: first.tx_hash }),
    ).rejects.toThrow();
  });

  it("at the fee cap, keeps re-broadcasting the same bytes instead of replacing", async () => {
    // A base fee of 0.3 gwei and Anvil's 1 gwei tip: 2 × base + tip is above a 1 gwei cap, the
    // base fee below it, so the payout is signed at the cap.
    await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: 300_000_000n });
    await chain.testClient.mine({ blocks: 1 });
    await startManualMining({
      PAYOUT_REBROADCAST_SECONDS: "1",
      PAYOUT_REPLACE_SECONDS: "1",
      PAYOUT_MAX_FEE_GWEI: "1",
    });
    const [claim] = await createPaidClaims(sql, 1);
    if (!claim) throw new Error("fixture missing");
    const sent = await waitFor(
      async () => {
        const payout = await payoutOf(claim);
        return payout && payout.broadcasts >= 3 ? payout : undefined;
      },
      { what: "three broadcasts of the capped payout" },
    );

    const attempts = await attemptsOf(claim);
    expect(attempts).toHaveLength(1);
    expect(BigInt(attempts[0]?.max_fee_per_gas ?? 0)).toBe(1_000_000_000n);
    await chain.testClient.mine({ blocks: 1 });
    await expectPaidOnceBy(claim, sent.tx_hash);
  });
});
