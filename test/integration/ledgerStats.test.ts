import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { checkLedgerFigures } from "../../api/ledger/checkLedgerFigures.ts";
import { listLedgerEntries, readLedgerEntries } from "../../api/ledger/listLedgerEntries.ts";
import { ledgerFiguresKept } from "../../api/ledger/readLedgerStats.ts";
import { forgetLedgerFigures } from "../../scripts/bench/yearOfTraffic.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import {
  expectKeptAsFresh,
  inParallel,
  keptFigures,
  payingClaim,
  payingClaims,
  randomChanges,
} from "../support/ledgerFigures.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The ledger's figures are kept by the database as entries come and go
 * (api/db/definitions/ledger_stats.sql); after every kind of change, and after changes made at
 * once, they must equal a fresh count over every completed claim and its confirmed payout (as
 * they were computed on each read before). Migration 0027's count: ledgerCount.test.ts.
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

const confirm = (id: string) =>
  sql`update app.payouts set status = 'confirmed', confirmed_at = now() where claim_id = ${id}`;
const complete = (id: string) =>
  sql`update app.claims set status = 'completed', completed_at = now() where id = ${id}`;

describe("the ledger's kept figures", () => {
  it("equal the aggregate over every entry after each kind of change", async () => {
    const one = "0x00000000000000000000000000000000000000a1";
    const two = "0x00000000000000000000000000000000000000b2";
    expect((await expectKeptAsFresh(sql)).completed).toBe("0");

    // Payout confirmed, then the claim completed (the confirmer's order).
    await payingClaim(sql, "clm_ledger_a", one, 10_000_001);
    await confirm("clm_ledger_a");
    await complete("clm_ledger_a");
    expect(await expectKeptAsFresh(sql)).toMatchObject({ completed: "1", addresses: "1" });

    // The claim completed first, then its payout confirmed; a second claim of the same address.
    await payingClaim(sql, "clm_ledger_b", one, 10_000_002);
    await complete("clm_ledger_b");
    await confirm("clm_ledger_b");
    expect(await expectKeptAsFresh(sql)).toMatchObject({
      completed: "2",
      addresses: "1",
      received: "20000003",
      paid_out: "2000000",
    });

    // Several claims completed by one statement, as a round completes them.
    await payingClaim(sql, "clm_ledger_c", two, 10_000_003);
    await payingClaim(sql, "clm_ledger_d", two, 10_000_004);
    await sql`update app.payouts set status = 'confirmed' where claim_id in ('clm_ledger_c', 'clm_ledger_d')`;
    await sql`update app.claims set status = 'completed', completed_at = now()
      where id in ('clm_ledger_c', 'clm_ledger_d')`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({ completed: "4", addresses: "2" });

    // A reorg takes a confirmed payout away (the claim stays completed), then mines it again.
    await sql`update app.payouts set status = 'broadcast', confirmed_at = null
      where claim_id = 'clm_ledger_a'`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({ completed: "3", addresses: "2" });
    await confirm("clm_ledger_a");
    expect(await expectKeptAsFresh(sql)).toMatchObject({ completed: "4" });

    // A completion undone (completed → paying), and one completed on another day.
    await sql`update app.claims set status = 'paying', completed_at = null
      where id in ('clm_ledger_c', 'clm_ledger_d')`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({ completed: "2", addresses: "1" });
    await sql`update app.claims set status = 'completed', completed_at = now() - interval '1 day'
      where id = 'clm_ledger_c'`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({ completed: "3", addresses: "2" });

    // A payment's row goes (a rewind), and comes back with another value.
    await sql`delete from app.payments where claim_id = 'clm_ledger_b'`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({ received: "20000004" });
    await sql`insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
        from_address, value, matched_by)
      values ('0xfeed', 0, 'clm_ledger_b', 1, '0xfeed', ${one}, 12000000, 'sender')`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({ received: "32000004" });

    // Counted from nothing again (migration 0027's count): the same figures.
    const before = await keptFigures(sql);
    await forgetLedgerFigures(sql);
    await sql`call app.count_ledger_figures(2)`;
    expect(await ledgerFiguresKept(sql)).toBe(true);
    expect(await keptFigures(sql)).toEqual(before);
  });

  it("leave out a completed claim without completed_at, with no day to count it on, and no write or count fails on it", async () => {
    const address = "0x00000000000000000000000000000000000000e5";
    const claim = "clm_ledger_undated";
    await payingClaim(sql, claim, address, 10_000_006);
    await confirm(claim);
    const before = await expectKeptAsFresh(sql);
    // Only a hand edit makes one: the completion sets completed_at with the status.
    await sql`update app.claims set status = 'completed', completed_at = null where id = ${claim}`;
    expect(await expectKeptAsFresh(sql)).toEqual(before);
    // A reorg takes its payout away and mines it again; its payment goes and comes back.
    await sql`update app.payouts set status = 'broadcast' where claim_id = ${claim}`;
    await confirm(claim);
    await sql`delete from app.payments where claim_id = ${claim}`;
    await sql`insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
        from_address, value, matched_by)
      values ('0xe5', 0, ${claim}, 1, '0xe5', ${address}, 10000006, 'sender')`;
    expect(await expectKeptAsFresh(sql)).toEqual(before);
    expect(await checkLedgerFigures(sql)).toMatchObject({ undated: 1 });
    // Nor is it listed: it would come first, newest first, with no time for its cursor.
    expect(await readLedgerEntries(sql, [claim])).toEqual([]);
    const [newest] = (await listLedgerEntries(sql, { limit: 1 })).entries;
    expect(newest?.claimId).not.toBe(claim);
    // Counted from nothing again (migration 0027's count): the same figures.
    await forgetLedgerFigures(sql);
    await sql`call app.count_ledger_figures(2)`;
    expect(await expectKeptAsFresh(sql)).toEqual(before);
    // Dated by hand: an entry of that day from then on.
    await sql`update app.claims set completed_at = now() where id = ${claim}`;
    expect(await expectKeptAsFresh(sql)).toMatchObject({
      completed: String(Number(before.completed) + 1),
    });
    expect(await checkLedgerFigures(sql)).toMatchObject({ undated: 0 });
  });

  it("count a claim's completion and its payout's confirmation in two transactions at once, once", async () => {
    const address = "0x00000000000000000000000000000000000000c3";
    await payingClaim(sql, "clm_ledger_race", address, 10_000_005);
    const before = (await keptFigures(sql)).totals.completed;
    const other = connectDatabase(database.url, { max: 1, name: "ledger race" });
    try {
      let completing: Promise<unknown> | undefined;
      await sql.begin(async (transaction) => {
        // The payout is confirmed first, uncommitted: its trigger sees the claim paying.
        await transaction`update app.payouts set status = 'confirmed'
          where claim_id = 'clm_ledger_race'`;
        // The completion, meanwhile, must wait for it, or it would count neither.
        completing = other`update app.claims set status = 'completed', completed_at = now()
          where id = 'clm_ledger_race'`.execute();
        await waitFor(
          async () => {
            const [row] = await sql<{ waiting: boolean }[]>`
              select exists (select 1 from pg_stat_activity
                where application_name = 'ledger race' and wait_event_type = 'Lock') as waiting`;
            return row?.waiting === true;
          },
          { timeoutMs: 10_000, what: "the completion to wait for the payout's transaction" },
        );
      });
      await completing;
    } finally {
      await other.end();
    }
    expect((await expectKeptAsFresh(sql)).completed).toBe(String(Number(before) + 1));
  });

  it("equal a fresh count after writers at once complete claims, confirm payouts and undo payments", async () => {
    const claims = await payingClaims(sql, "clm_busy", 24, 3);
    await inParallel(database.url, 4, (writer) => randomChanges(writer, claims, 60));
    await expectKeptAsFresh(sql);
  });
});
