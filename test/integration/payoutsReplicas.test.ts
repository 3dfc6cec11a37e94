import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../api/db/connect.ts";
import type { RunningService } from "../../api/service.ts";
import { LOCK_KEYS } from "../../api/workers/lockKeys.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  countByRecipient,
  createPaidClaims,
  createPayoutHarness,
  type PaidClaim,
  payoutRows,
  payoutTransfers,
  waitForStatus,
} from "../support/payouts.ts";
import { startTestService } from "../support/service.ts";
import { waitFor } from "../support/waitFor.ts";

let chain: TestChain;
let database: TestDatabase;
let sql: Database;
let chainWithDatabase: ChainWithDatabase | undefined;
const services: RunningService[] = [];

beforeAll(async () => {
  ({ chain, database, sql } = chainWithDatabase = await startChainWithDatabase());
});

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await chainWithDatabase?.stop();
});

/** Exactly one transfer per claim on chain, and every wallet transaction is a payout row. */
async function expectEachPaidOnce(claims: PaidClaim[]) {
  const transfers = await payoutTransfers(chain);
  const counts = countByRecipient(transfers);
  for (const claim of claims) expect(counts.get(claim.payoutAddress)).toBe(1);
  const payouts = await payoutRows(sql);
  expect(new Set(payouts.map((payout) => payout.nonce)).size).toBe(payouts.length);
  expect(payouts.map((payout) => payout.nonce)).toEqual(payouts.map((_, index) => BigInt(index)));
  const sent = await chain.publicClient.getTransactionCount({ address: chain.payout.address });
  expect(sent).toBe(payouts.length);
  expect(transfers).toHaveLength(payouts.length);
}

/** Advisory locks of the payout workers held in this test's database. */
async function heldPayoutLocks(): Promise<number> {
  const [row] = await sql<{ held: bigint }[]>`
    select count(*) as held from pg_locks
    where locktype = 'advisory' and granted
      and database = (select oid from pg_database where datname = current_database())
      and objid = any(${sql.array([LOCK_KEYS.payoutSender, LOCK_KEYS.payoutConfirmer])}::oid[])`;
  return Number(row?.held ?? 0n);
}

describe("payouts with several replicas", () => {
  it("two services on one database pay each claim once, and the standby takes over", async () => {
    const overrides = { PAYOUT_INTERVAL_MS: "50", PAYOUT_BATCH_SIZE: "5" };
    // The first holds both payout locks before the second starts and stands by.
    services.push(await startTestService(chain, database.url, overrides));
    await waitFor(async () => (await heldPayoutLocks()) === 2, { what: "the payout locks" });
    services.push(await startTestService(chain, database.url, overrides));
    const firstWave = await createPaidClaims(sql, 20);
    await waitForStatus(
      sql,
      firstWave.map((claim) => claim.id),
      "completed",
    );

    // The replica holding the locks goes away; the standby takes them and carries on.
    await services.shift()?.stop();
    const secondWave = await createPaidClaims(sql, 20);
    await waitForStatus(
      sql,
      secondWave.map((claim) => claim.id),
      "completed",
    );
    await expectEachPaidOnce([...firstWave, ...secondWave]);
    await Promise.all(services.splice(0).map((service) => service.stop()));
  });

  it("even without the advisory locks, two senders and two confirmers racing pay each claim once", async () => {
    const [left, right] = await Promise.all([
      createPayoutHarness(chain, database.url, { PAYOUT_BATCH_SIZE: "4" }),
      createPayoutHarness(chain, database.url, { PAYOUT_BATCH_SIZE: "4" }),
    ]);
    try {
      const claims = await createPaidClaims(sql, 30);
      const ids = new Set(claims.map((claim) => claim.id));
      await waitFor(
        async () => {
          await Promise.all([
            left.sender.tick(),
            right.sender.tick(),
            left.confirmer.tick(),
            right.confirmer.tick(),
          ]);
          const rows = await sql<{ status: string }[]>`
            select status from app.claims where id = any(${sql.array([...ids])}::text[])`;
          return rows.every((row) => row.status === "completed");
        },
        { what: "all claims to complete under racing workers" },
      );
      const receipts = await sql`
        select claim_id from app.receipts where claim_id = any(${sql.array([...ids])}::text[])`;
      expect(receipts).toHaveLength(claims.length);
      await expectEachPaidOnce(claims);
    } finally {
      await Promise.all([left.stop(), right.stop()]);
    }
  });
});
