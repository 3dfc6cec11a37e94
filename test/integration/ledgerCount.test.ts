import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate, readMigrations } from "../../api/db/migrate.ts";
import {
  createLedgerCountWorker,
  readLedgerCountState,
} from "../../api/ledger/ledgerCountWorker.ts";
import { ledgerFiguresKept, readLedgerTotals } from "../../api/ledger/readLedgerStats.ts";
import { recordPayments } from "../../api/lifecycle/recordPayments.ts";
import { createLogger } from "../../api/logger.ts";
import { runWorker } from "../../api/workers/runWorker.ts";
import { forgetLedgerFigures } from "../../scripts/bench/yearOfTraffic.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import {
  expectKeptAsFresh,
  inParallel,
  payingClaim,
  payingClaims,
  randomChanges,
} from "../support/ledgerFigures.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The count of the ledger's figures (app.count_ledger_figures, run after the start by
 * api/ledger/ledgerCountWorker.ts, docs/operating.md#the-ledgers-count-migration-0027): on a
 * database that already held rows, after the migration runner; while writers change claims
 * before and past its cursor; and the readers meanwhile.
 */

let database: TestDatabase;
let sql: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 2 });
});

afterAll(async () => {
  await sql?.end();
  await database?.drop();
});

describe("migration 0027's count", () => {
  it("counts the rows a database held before the migration after the start, in the background, and the triggers take over", async () => {
    const older = await createTestDatabase({ empty: true });
    const directory = await mkdtemp(join(tmpdir(), "ledger-migrations-"));
    const before = connectDatabase(older.url, { max: 2 });
    try {
      // The service as it was before 0027: its migrations, no ledger figures.
      for (const migration of (await readMigrations()).filter((each) => each.id < 27)) {
        const file = `${String(migration.id).padStart(4, "0")}_${migration.name}.sql`;
        await writeFile(join(directory, file), migration.sql);
      }
      await migrate(before, { migrations: directory });
      const claims = await payingClaims(before, "clm_older", 30, 4);
      await randomChanges(before, claims, 80);
      // The start migrates without counting: the service serves at once, its readers counting
      // afresh meanwhile.
      const run = await migrate(before);
      expect(run.applied).toContain(27);
      expect(await readLedgerCountState(before)).toMatchObject({ finished: false, batches: 0 });
      const fresh = await readLedgerTotals(before);
      // The worker's ticks, driven by hand, a few batches each, with writers between them.
      const worker = createLedgerCountWorker(
        { sql: before, logger: createLogger("silent") },
        { batchSize: 2, batchesPerTick: 3 },
      );
      expect(await worker.tick()).toBe(true);
      expect(await ledgerFiguresKept(before)).toBe(false);
      expect(await readLedgerTotals(before)).toEqual(fresh);
      let ticks = 1;
      // true: more to count at once; a delay (the finished count's interval) once done.
      while ((await worker.tick()) === true) {
        ticks += 1;
        await randomChanges(before, claims, 5);
      }
      expect(ticks).toBeGreaterThan(1);
      expect(await readLedgerCountState(before)).toMatchObject({ finished: true });
      await expectKeptAsFresh(before);
      // Finished: a tick counts nothing more, and waits the finished count's interval.
      expect(await worker.tick()).toBe(600_000);
      await randomChanges(before, claims, 40);
      await expectKeptAsFresh(before);
    } finally {
      await before.end();
      await older.drop();
      await rm(directory, { recursive: true, force: true });
    }
  });

  it("runs as a worker loop in the background, its readers answering meanwhile, until it has counted every claim", async () => {
    const claims = await payingClaims(sql, "clm_loop", 40, 5);
    await randomChanges(sql, claims, 60);
    await forgetLedgerFigures(sql);
    const fresh = await readLedgerTotals(sql);
    const logger = createLogger("silent");
    // One batch a tick: the loop takes many rounds, each answering the readers between them.
    const worker = createLedgerCountWorker({ sql, logger }, { batchSize: 2, batchesPerTick: 1 });
    const loop = runWorker(
      {
        lockSession: (onClose) => connectDatabase(database.url, { max: 1, session: { onClose } }),
        notifications: sql,
      },
      worker,
      logger,
    );
    try {
      expect(await loop.firstTick).toBe("holding");
      expect(await readLedgerTotals(sql)).toEqual(fresh);
      await waitFor(async () => (await readLedgerCountState(sql)).finished, {
        what: "the worker loop to finish the count",
      });
      expect((await readLedgerCountState(sql)).batches).toBeGreaterThan(1);
      await expectKeptAsFresh(sql);
    } finally {
      await loop.stop();
    }
  });

  it("leaves the readers counting afresh until it has reached every claim", async () => {
    await payingClaims(sql, "clm_unread", 3, 1);
    const fresh = await readLedgerTotals(sql);
    await forgetLedgerFigures(sql);
    expect(await ledgerFiguresKept(sql)).toBe(false);
    expect(await readLedgerTotals(sql)).toEqual(fresh);
    await sql`call app.count_ledger_figures()`;
    await expectKeptAsFresh(sql);
  });

  it("waits for the writer of a claim it has not reached, and counts what that writer committed", async () => {
    const [claim] = await payingClaims(sql, "clm_held", 1, 1);
    if (!claim) throw new Error("no claim");
    await forgetLedgerFigures(sql);
    const counter = connectDatabase(database.url, { max: 1, name: "ledger count" });
    try {
      let counting: Promise<unknown> | undefined;
      await sql.begin(async (transaction) => {
        // Past the cursor (nothing is counted yet): the trigger leaves this claim to the count.
        await transaction`update app.payouts set status = 'confirmed' where claim_id = ${claim}`;
        await transaction`update app.claims set status = 'completed', completed_at = now()
          where id = ${claim}`;
        counting = counter`call app.count_ledger_figures(1, '10s')`.execute();
        // The count must wait for this transaction, or it would count the claim as it was.
        await waitFor(
          async () => {
            const [row] = await sql<{ waiting: boolean }[]>`
              select exists (select 1 from pg_stat_activity
                where application_name = 'ledger count' and wait_event_type = 'Lock') as waiting`;
            return row?.waiting === true;
          },
          { timeoutMs: 10_000, what: "the count to wait for the writer's transaction" },
        );
      });
      await counting;
    } finally {
      await counter.end();
    }
    await expectKeptAsFresh(sql);
  });

  it("never holds up a payment recorded for a claim it has not reached: the payment moves no entry", async () => {
    const claim = "clm_unheld";
    const address = "0x00000000000000000000000000000000000000d4";
    await sql`insert into app.claims (id, flow, payout_address, amount_due, expires_at)
      values (${claim}, 'claim', ${address}, 10000000, now() + interval '7 days')`;
    await forgetLedgerFigures(sql);
    const counter = connectDatabase(database.url, { max: 1 });
    try {
      await counter.begin(async (batch) => {
        // What a batch of the count holds while it counts; the claim is past its cursor.
        await batch`select 1 from app.ledger_backfill for update`;
        await sql.begin(async (transaction) => {
          // Only the failure bound: recording the payment must not wait for the batch at all.
          await transaction`set local lock_timeout = '10s'`;
          const hash = `0x${"d4".repeat(32)}`;
          const paid = await recordPayments(transaction, [
            {
              claimId: claim,
              matchedBy: "amount",
              transfer: {
                txHash: hash,
                logIndex: 0,
                blockNumber: 1n,
                blockHash: hash,
                from: address,
                value: 10_000_000n,
                transferOrdinal: 1,
                authorizationNonce: null,
              },
              verified: true,
            },
          ]);
          expect(paid).toEqual([claim]);
        });
      });
    } finally {
      await counter.end();
    }
    await sql`call app.count_ledger_figures()`;
    await expectKeptAsFresh(sql);
  });

  it("walks claims in the order its cursor compares them, the triggers' order too, on a server whose collation orders ids unlike their bytes", async () => {
    // Claim ids are base64url (clm_…: both cases, '-' and '_'); ICU's English puts `a` before
    // `B`, bytes after. Were the count's walk and its cursor's comparison, or the triggers'
    // comparison, under different collations, the count would skip or repeat a claim, or a
    // trigger would leave a claim the count had passed (or count one it had not).
    const ordered = await createTestDatabase({ empty: true, icuLocale: "en" });
    const icu = connectDatabase(ordered.url, { max: 2 });
    try {
      await migrate(icu);
      const claims = ["a", "B", "c", "D", "e", "F"].map((tail) => `clm_order_${tail}`);
      for (const [index, claim] of claims.entries()) {
        await payingClaim(icu, claim, `0x${"f".repeat(39)}${index}`, 10_000_000 + index);
      }
      await icu`update app.payouts set status = 'confirmed' where claim_id in ${icu(claims)}`;
      await icu`update app.claims set status = 'completed', completed_at = now()
        where id in ${icu(claims)}`;
      await forgetLedgerFigures(icu);
      await icu`call app.count_ledger_figures(1, '100ms', 2)`;
      expect((await readLedgerCountState(icu)).countedTo).toBe("clm_order_B");
      // Completions undone: one the count has passed (in bytes, not yet), one it has not (in
      // bytes, passed).
      await icu`update app.claims set status = 'paying', completed_at = null
        where id in ('clm_order_a', 'clm_order_D')`;
      await icu`call app.count_ledger_figures(1)`;
      expect(await expectKeptAsFresh(icu)).toMatchObject({ completed: "4" });
    } finally {
      await icu.end();
      await ordered.drop();
    }
  });

  it("counts every claim right while writers change claims before and past its cursor", async () => {
    const claims = await payingClaims(sql, "clm_during", 40, 5);
    await randomChanges(sql, claims, 60);
    await forgetLedgerFigures(sql);
    const counter = connectDatabase(database.url, { max: 1, name: "ledger count" });
    try {
      let counted = false;
      const counting = counter`call app.count_ledger_figures(2)`.execute().then(() => {
        counted = true;
      });
      // Writers until the count has finished (and at least a round of changes each).
      await inParallel(database.url, 3, async (writer) => {
        do await randomChanges(writer, claims, 10);
        while (!counted);
      });
      await counting;
      const [state] = await sql<{ batches: string }[]>`
        select batches::text from app.ledger_backfill`;
      expect(Number(state?.batches)).toBeGreaterThan(1);
    } finally {
      await counter.end();
    }
    await expectKeptAsFresh(sql);
  });
});
