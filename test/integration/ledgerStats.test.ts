import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate, readMigrations } from "../../api/db/migrate.ts";
import { checkLedgerFigures } from "../../api/ledger/checkLedgerFigures.ts";
import {
  ledgerFiguresKept,
  readLedgerDaily,
  readLedgerTotals,
} from "../../api/ledger/readLedgerStats.ts";
import { forgetLedgerFigures } from "../../scripts/bench/yearOfTraffic.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The ledger's figures are kept by the database as entries come and go
 * (api/db/definitions/ledger_stats.sql); after every kind of change they must equal the
 * aggregate over every completed claim and its confirmed payout, as they were computed on each
 * read before (the reference below). The rows are written straight, as each owner writes them.
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

/**
 * The figures aggregated from scratch: the read the kept figures replace. An entry is a completed
 * claim with a confirmed payout, per day as in all (the per-day read counted a completed claim
 * whose payout a reorg had taken away; the totals did not).
 */
async function reference() {
  const [totals] = await sql<Record<string, string | null>[]>`
    select count(*)::text as completed, count(distinct c.payout_address)::text as addresses,
      coalesce(sum(p.value), 0)::text as received, coalesce(sum(po.amount), 0)::text as paid_out,
      date_trunc('milliseconds', min(c.completed_at))::text as first,
      date_trunc('milliseconds', max(c.completed_at))::text as last
    from app.claims c
    join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    left join app.payments p on p.claim_id = c.id
    where c.status = 'completed'`;
  const daily = await sql<{ day: string; completed: string; addresses: string }[]>`
    select to_char(d.day, 'YYYY-MM-DD') as day, count(c.id)::text as completed,
      count(distinct c.payout_address)::text as addresses,
      coalesce(sum(p.value), 0)::text as received, coalesce(sum(po.amount), 0)::text as paid_out
    from generate_series((now() at time zone 'UTC')::date - 2, (now() at time zone 'UTC')::date,
      interval '1 day') as d(day)
    left join (app.claims c join app.payouts po on po.claim_id = c.id and po.status = 'confirmed')
      on c.status = 'completed'
      and c.completed_at >= d.day::date::timestamp at time zone 'UTC'
      and c.completed_at < (d.day::date + 1)::timestamp at time zone 'UTC'
    left join app.payments p on p.claim_id = c.id
    group by d.day order by d.day`;
  return { totals, daily };
}

async function kept() {
  const totals = await readLedgerTotals(sql);
  const daily = await readLedgerDaily(sql, 3);
  const at = async (date: Date | null) =>
    date === null
      ? null
      : ((await sql<{ t: string }[]>`select ${date}::timestamptz::text as t`)[0]?.t ?? null);
  return {
    totals: {
      completed: String(totals.completedPayouts),
      addresses: String(totals.uniquePayoutAddresses),
      received: String(totals.received),
      paid_out: String(totals.paidOut),
      first: await at(totals.firstCompletedAt),
      last: await at(totals.lastCompletedAt),
    },
    daily: daily.map((day) => ({
      day: day.day,
      completed: String(day.completedPayouts),
      addresses: String(day.uniquePayoutAddresses),
      received: String(day.received),
      paid_out: String(day.paidOut),
    })),
  };
}

async function expectKeptAsAggregated() {
  expect(await ledgerFiguresKept(sql)).toBe(true);
  const [now, fromScratch] = [await kept(), await reference()];
  expect(now).toEqual(fromScratch);
  // Every day and every payout address, not only the three days the reads above show.
  expect(await checkLedgerFigures(sql)).toMatchObject({
    kept: true,
    drifted: [],
    driftedPayees: 0,
  });
  return now.totals;
}

let nonce = 0;
/** A claim paying its payout, with its payment (value) and a signed payout. */
async function payingClaim(id: string, address: string, value: number) {
  nonce += 1;
  const hex = nonce.toString(16).padStart(64, "0");
  await sql`
    insert into app.claims (id, flow, payout_address, amount_due, status, expires_at, paid_at)
    values (${id}, 'claim', ${address}, ${value}, 'paying', now() + interval '7 days', now())`;
  await sql`
    insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
      from_address, value, matched_by)
    values (${`0x${hex}`}, 0, ${id}, 1, ${`0x${hex}`}, ${address}, ${value}, 'sender')`;
  await sql`
    insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status)
    values (${id}, ${address}, 1000000, ${nonce}, ${`0x${hex}`}, '0x00', 'broadcast')`;
}

const confirm = (id: string) =>
  sql`update app.payouts set status = 'confirmed', confirmed_at = now() where claim_id = ${id}`;
const complete = (id: string) =>
  sql`update app.claims set status = 'completed', completed_at = now() where id = ${id}`;

describe("the ledger's kept figures", () => {
  it("equal the aggregate over every entry after each kind of change", async () => {
    const one = "0x00000000000000000000000000000000000000a1";
    const two = "0x00000000000000000000000000000000000000b2";
    expect((await expectKeptAsAggregated()).completed).toBe("0");

    // Payout confirmed, then the claim completed (the confirmer's order).
    await payingClaim("clm_ledger_a", one, 10_000_001);
    await confirm("clm_ledger_a");
    await complete("clm_ledger_a");
    expect(await expectKeptAsAggregated()).toMatchObject({ completed: "1", addresses: "1" });

    // The claim completed first, then its payout confirmed; a second claim of the same address.
    await payingClaim("clm_ledger_b", one, 10_000_002);
    await complete("clm_ledger_b");
    await confirm("clm_ledger_b");
    expect(await expectKeptAsAggregated()).toMatchObject({
      completed: "2",
      addresses: "1",
      received: "20000003",
      paid_out: "2000000",
    });

    // Several claims completed by one statement, as a round completes them.
    await payingClaim("clm_ledger_c", two, 10_000_003);
    await payingClaim("clm_ledger_d", two, 10_000_004);
    await sql`update app.payouts set status = 'confirmed' where claim_id in ('clm_ledger_c', 'clm_ledger_d')`;
    await sql`update app.claims set status = 'completed', completed_at = now()
      where id in ('clm_ledger_c', 'clm_ledger_d')`;
    expect(await expectKeptAsAggregated()).toMatchObject({ completed: "4", addresses: "2" });

    // A reorg takes a confirmed payout away (the claim stays completed), then mines it again.
    await sql`update app.payouts set status = 'broadcast', confirmed_at = null
      where claim_id = 'clm_ledger_a'`;
    expect(await expectKeptAsAggregated()).toMatchObject({ completed: "3", addresses: "2" });
    await confirm("clm_ledger_a");
    expect(await expectKeptAsAggregated()).toMatchObject({ completed: "4" });

    // A completion undone (completed → paying), and one completed on another day.
    await sql`update app.claims set status = 'paying', completed_at = null
      where id in ('clm_ledger_c', 'clm_ledger_d')`;
    expect(await expectKeptAsAggregated()).toMatchObject({ completed: "2", addresses: "1" });
    await sql`update app.claims set status = 'completed', completed_at = now() - interval '1 day'
      where id = 'clm_ledger_c'`;
    expect(await expectKeptAsAggregated()).toMatchObject({ completed: "3", addresses: "2" });

    // A payment's row goes (a rewind), and comes back with another value.
    await sql`delete from app.payments where claim_id = 'clm_ledger_b'`;
    expect(await expectKeptAsAggregated()).toMatchObject({ received: "20000004" });
    await sql`insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
        from_address, value, matched_by)
      values ('0xfeed', 0, 'clm_ledger_b', 1, '0xfeed', ${one}, 12000000, 'sender')`;
    expect(await expectKeptAsAggregated()).toMatchObject({ received: "32000004" });

    // Counted from nothing again (migration 0027's count): the same figures.
    const before = await kept();
    await forgetLedgerFigures(sql);
    await sql`call app.count_ledger_figures(2)`;
    expect(await ledgerFiguresKept(sql)).toBe(true);
    expect(await kept()).toEqual(before);
  });

  it("count a claim's completion and its payout's confirmation in two transactions at once, once", async () => {
    const address = "0x00000000000000000000000000000000000000c3";
    await payingClaim("clm_ledger_race", address, 10_000_005);
    const before = (await kept()).totals.completed;
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
    expect((await expectKeptAsAggregated()).completed).toBe(String(Number(before) + 1));
  });

  it("equal a fresh count after writers at once complete claims, confirm payouts and undo payments", async () => {
    const claims = await payingClaims("clm_busy", 24, 3);
    await inParallel(4, (writer) => randomChanges(writer, claims, 60));
    await expectKeptAsAggregated();
  });
});

describe("migration 0027's count", () => {
  it("counts the rows a database held before the migration, and the triggers take over", async () => {
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
      const previous = sql;
      sql = before;
      try {
        const claims = await payingClaims("clm_older", 30, 4);
        await randomChanges(before, claims, 80);
        const run = await migrate(before);
        expect(run.applied).toEqual([27]);
        await expectKeptAsAggregated();
        await randomChanges(before, claims, 40);
        await expectKeptAsAggregated();
      } finally {
        sql = previous;
      }
    } finally {
      await before.end();
      await older.drop();
      await rm(directory, { recursive: true, force: true });
    }
  });

  it("leaves the readers counting afresh until it has reached every claim", async () => {
    await payingClaims("clm_unread", 3, 1);
    const fresh = await readLedgerTotals(sql);
    await forgetLedgerFigures(sql);
    expect(await ledgerFiguresKept(sql)).toBe(false);
    expect(await readLedgerTotals(sql)).toEqual(fresh);
    await sql`call app.count_ledger_figures()`;
    await expectKeptAsAggregated();
  });

  it("waits for the writer of a claim it has not reached, and counts what that writer committed", async () => {
    const [claim] = await payingClaims("clm_held", 1, 1);
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
    await expectKeptAsAggregated();
  });

  it("counts every claim right while writers change claims before and past its cursor", async () => {
    const claims = await payingClaims("clm_during", 40, 5);
    await randomChanges(sql, claims, 60);
    await forgetLedgerFigures(sql);
    const counter = connectDatabase(database.url, { max: 1, name: "ledger count" });
    try {
      let counted = false;
      const counting = counter`call app.count_ledger_figures(2)`.execute().then(() => {
        counted = true;
      });
      // Writers until the count has finished (and at least a round of changes each).
      await inParallel(3, async (writer) => {
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
    await expectKeptAsAggregated();
  });
});

/** `count` claims paying their payouts, over `addresses` payout addresses. */
async function payingClaims(prefix: string, count: number, addresses: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const id = `${prefix}_${String(index).padStart(3, "0")}`;
    const address = `0x${(index % addresses).toString(16).padStart(2, "0").padEnd(40, "e")}`;
    await payingClaim(id, address, 10_000_000 + index);
    ids.push(id);
  }
  return ids;
}

/**
 * `changes` changes to random claims among `claims`, each in its own transaction, as the
 * service's writers make them: the confirmer's confirmation and completion (alone or together),
 * a reorg taking a payout back, an undone completion, the matcher's rewind of a payment and the
 * payment found again. Two writers may meet on a claim: a deadlock or a lock timeout is a writer
 * giving up, as in the service, and the figures must stay right through it.
 */
async function randomChanges(writer: Database, claims: string[], changes: number): Promise<void> {
  for (let change = 0; change < changes; change += 1) {
    const claim = claims[Math.floor(Math.random() * claims.length)] ?? "";
    const daysAgo = Math.floor(Math.random() * 3);
    try {
      switch (Math.floor(Math.random() * 6)) {
        case 0:
          await writer`update app.payouts set status = 'confirmed' where claim_id = ${claim}`;
          break;
        case 1:
          await writer`update app.claims set status = 'completed',
            completed_at = now() - ${daysAgo} * interval '1 day' where id = ${claim}`;
          break;
        case 2:
          await writer.begin(async (transaction) => {
            await transaction`update app.payouts set status = 'confirmed' where claim_id = ${claim}`;
            await transaction`update app.claims set status = 'completed',
              completed_at = now() - ${daysAgo} * interval '1 day' where id = ${claim}`;
          });
          break;
        case 3:
          await writer`update app.payouts set status = 'broadcast' where claim_id = ${claim}`;
          break;
        case 4:
          await writer`update app.claims set status = 'paying', completed_at = null
            where id = ${claim}`;
          break;
        default:
          await writer.begin(async (transaction) => {
            const [gone] = await transaction`delete from app.payments where claim_id = ${claim}
              returning claim_id`;
            if (gone) return;
            nonce += 1;
            const hash = `0x${nonce.toString(16).padStart(64, "f")}`;
            await transaction`insert into app.payments (tx_hash, log_index, claim_id,
                block_number, block_hash, from_address, value, matched_by)
              values (${hash}, 0, ${claim}, 1, ${hash}, ${"0x".padEnd(42, "d")},
                ${9_000_000 + nonce}, 'sender')`;
          });
      }
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "40P01" && code !== "55P03") throw error;
    }
  }
}

/** `writers` connections of their own, each running `work` at once. */
async function inParallel(writers: number, work: (writer: Database) => Promise<void>) {
  const connections = Array.from({ length: writers }, (_, index) =>
    connectDatabase(database.url, { max: 1, name: `ledger writer ${index}` }),
  );
  try {
    await Promise.all(connections.map(work));
  } finally {
    await Promise.all(connections.map((connection) => connection.end()));
  }
}
