import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import {
  checkRowCounts,
  countRows,
  foldRowCountChanges,
  readRowCounts,
} from "../../api/db/rowCounts.ts";
import { createLogger } from "../../api/logger.ts";
import { pruneInboundMessages } from "../../api/mailbox/inboundMessages.ts";
import { readMailCounts } from "../../api/mailbox/mailStatus.ts";
import { countStatuses, readStatusCounts } from "../../api/metrics/readStatusCounts.ts";
import { createRowCountWorker } from "../../api/metrics/rowCountWorker.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

/**
 * The scrape's counts kept by the triggers of api/db/definitions/row_counts.sql (migration 0032):
 * after any mix of inserts, status changes, deletes, retention and concurrent writers, what
 * /metrics reads from the kept counts equals a fresh count over the tables, folded or not.
 */

let database: TestDatabase;
let sql: Database;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 12 });
});

afterAll(async () => {
  await sql?.end();
  await database?.drop();
});

beforeEach(async () => {
  await sql`truncate app.mail_messages_pruned`;
  await sql`truncate app.payout_attempts, app.payouts, app.payments, app.outbox,
    app.mail_messages, app.claims cascade`;
  await sql`update app.row_count_state set counted_at = null`;
});

const claimId = () => `clm_${randomBytes(12).toString("base64url")}`;

async function insertClaims(
  db: Database | Parameters<Parameters<Database["begin"]>[1]>[0],
  n: number,
  status = "awaiting_payment",
) {
  const ids = Array.from({ length: n }, claimId);
  await db`
    insert into app.claims (id, flow, payout_address, amount_due, status, expires_at)
    select id, 'claim', '0x' || repeat('ab', 20), 10000001, ${status}, now() + interval '1 day'
    from unnest(${ids}::text[]) id`;
  return ids;
}

let nonce = 0;
async function insertPayout(id: string, status: string, broadcasts: number) {
  nonce += 1;
  await sql`
    insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status,
      broadcasts)
    values (${id}, ${`0x${"ab".repeat(20)}`}, 1000000, ${nonce}, ${`0x${randomBytes(32).toString("hex")}`},
      '0x00', ${status}, ${broadcasts})`;
}

async function insertMail(kind: string, status: string, claim: string | null = null) {
  await sql`
    insert into app.outbox (kind, claim_id, recipient, idempotency_key, status)
    values (${kind}, ${claim}, 'a@example.com', ${randomBytes(8).toString("hex")}, ${status})`;
}

async function insertMessage(status: string, outcome: string | null, processedDaysAgo = 0) {
  await sql`
    insert into app.mail_messages (message_id, transport, raw, size_bytes, status, outcome,
      processed_at)
    values (${`<${randomBytes(8).toString("hex")}@test>`}, 'smtp', '\\x00', 1, ${status},
      ${outcome}, now() - make_interval(days => ${processedDaysAgo}))`;
}

/** The mail counts as readMailCounts gives them before the first count: over the tables. */
async function freshMailCounts() {
  await sql`update app.row_count_state set counted_at = null`;
  try {
    return await readMailCounts(sql);
  } finally {
    await sql`update app.row_count_state set counted_at = now()`;
  }
}

const byOutcome = (counts: Awaited<ReturnType<typeof readMailCounts>>) =>
  Object.fromEntries(
    counts.inboundByOutcome.map((row) => [`${row.status}/${row.outcome ?? ""}`, row.count]),
  );

/** The kept counts equal fresh ones, with the changes unfolded and after a fold. */
async function expectExact() {
  for (const fold of [false, true]) {
    if (fold) await foldRowCountChanges(sql);
    const status = await readStatusCounts(sql);
    expect(status).toEqual(await countStatuses(sql));
    const mail = await readMailCounts(sql);
    const fresh = await freshMailCounts();
    expect({ ...mail, inboundByOutcome: byOutcome(mail) }).toEqual({
      ...fresh,
      inboundByOutcome: byOutcome(fresh),
    });
  }
}

describe("the scrape's kept counts", () => {
  it("are read only once every row has been counted, and then match the tables", async () => {
    await insertClaims(sql, 3);
    expect(await readRowCounts(sql, ["claims"])).toBeNull();
    await countRows(sql);
    expect(await readRowCounts(sql, ["claims"])).not.toBeNull();
    expect((await readStatusCounts(sql)).claims.awaiting_payment).toBe(3);
  });

  it("are compared with a fresh count in one snapshot, which names each one that drifted", async () => {
    const check = () => checkRowCounts(sql, { statementTimeoutMs: 10_000 });
    await insertClaims(sql, 3);
    expect(await check()).toBeNull();
    await countRows(sql);
    const [paid] = await insertClaims(sql, 2, "paid");
    await insertPayout(paid as string, "confirmed", 1);
    await insertMail("receipt_mail", "sent", paid as string);
    await insertMessage("processed", "claim_created");
    expect(await check()).toEqual([]);
    await foldRowCountChanges(sql);
    expect(await check()).toEqual([]);
    // A label that came and went since the count: kept at 0, counted nowhere, no drift.
    const [gone] = await insertClaims(sql, 1, "failed");
    await sql`update app.claims set status = 'expired' where id = ${gone as string}`;
    await foldRowCountChanges(sql);
    expect(await check()).toEqual([]);
    // As a hand edit with the triggers off would leave them: one count too high, one missing.
    await sql`update app.row_counts set n = n + 1 where counted = 'claims' and label = 'paid'`;
    await sql`delete from app.row_counts where counted = 'mail_messages'`;
    expect(await check()).toEqual([
      { counted: "claims", label: "paid", detail: null, kept: 3, fresh: 2 },
      {
        counted: "mail_messages",
        label: "processed",
        detail: "claim_created",
        kept: 0,
        fresh: 1,
      },
    ]);
  });

  it("follow inserts, status changes and deletes on every counted table", async () => {
    const open = await insertClaims(sql, 5);
    await insertClaims(sql, 2, "expired");
    await countRows(sql);
    await expectExact();

    await insertClaims(sql, 4);
    await sql`update app.claims set status = 'paid' where id = any(${open.slice(0, 3)})`;
    await sql`update app.claims set status = 'expired' where id = ${open[3] as string}`;
    // An update that moves no status (a tx hash named) moves no count.
    await sql`update app.claims set tx_hash = ${`0x${"cd".repeat(32)}`} where id = ${open[4] as string}`;
    await expectExact();

    await insertPayout(open[0] as string, "signed", 0);
    await insertPayout(open[1] as string, "broadcast", 2);
    await insertPayout(open[2] as string, "confirmed", 1);
    await sql`update app.payouts set broadcasts = 1, status = 'broadcast' where claim_id = ${open[0] as string}`;
    await sql`update app.payouts set status = 'reverted' where claim_id = ${open[1] as string}`;
    await insertMail("receipt_mail", "sent", open[2] as string);
    await insertMail("mail_reply", "pending");
    await insertMail("mail_instructions", "sent");
    await insertMail("mail_reply", "failed");
    await sql`update app.outbox set status = 'sent' where status = 'pending'`;
    await insertMessage("received", null);
    await insertMessage("rejected", "unauthenticated");
    await insertMessage("processed", "claim_created");
    await sql`update app.mail_messages set status = 'ignored', outcome = 'auto_reply'
      where status = 'received'`;
    await expectExact();

    await sql`delete from app.payouts where claim_id = ${open[1] as string}`;
    await sql`delete from app.outbox where kind = 'mail_reply' and status = 'failed'`;
    await sql`delete from app.mail_messages where status = 'processed'`;
    await sql`delete from app.events where claim_id in (select id from app.claims where status = 'expired')`;
    await sql`delete from app.claims where status = 'expired'`;
    await expectExact();
    const counts = await readStatusCounts(sql);
    expect(counts.claims).toMatchObject({ awaiting_payment: 5, paid: 3, expired: 0 });
    expect(counts.payouts).toEqual({ sent: 2, confirmed: 1, reverted: 0 });
  });

  it("keep the mail totals through retention: pruned messages leave the kept ones, never the totals", async () => {
    await countRows(sql);
    for (let i = 0; i < 3; i++) await insertMessage("rejected", "unauthenticated", 40);
    await insertMessage("ignored", "auto_reply", 40);
    await insertMessage("ignored", "auto_reply", 1);
    await insertMessage("received", null);
    const before = await readMailCounts(sql);
    expect(await pruneInboundMessages(sql, 30)).toBe(4);
    const after = await readMailCounts(sql);
    expect(after.received).toBe(before.received);
    expect(after.rejected).toBe(3);
    expect(after.ignored).toBe(2);
    expect(byOutcome(after)).toEqual({ "ignored/auto_reply": 1, "received/": 1 });
    await expectExact();
  });

  it("never show the mail totals going down while retention deletes", async () => {
    await countRows(sql);
    for (let i = 0; i < 60; i++) await insertMessage("rejected", "unauthenticated", 40);
    let pruning = true;
    const pruned = (async () => {
      try {
        while ((await pruneInboundMessages(sql, 30, 3)) > 0);
      } finally {
        pruning = false;
      }
    })();
    const seen: number[] = [];
    while (pruning) seen.push((await readMailCounts(sql)).rejected);
    await pruned;
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set([60]));
    expect(byOutcome(await readMailCounts(sql))).toEqual({});
  });

  it("lose nothing to concurrent writers, folds and a count made while changes are in flight", async () => {
    await insertClaims(sql, 10);
    // Writers in flight while every row is counted: begun before its snapshot, committed after.
    const inFlight = Array.from({ length: 3 }, () => {
      let release: () => void = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let inserted: () => void = () => {};
      const started = new Promise<void>((resolve) => {
        inserted = resolve;
      });
      const done = sql.begin(async (transaction) => {
        await insertClaims(transaction, 2);
        await transaction`update app.claims set status = 'expired'
          where id = (select id from app.claims where status = 'awaiting_payment' limit 1
            for update skip locked)`;
        inserted();
        await released;
      });
      return { release, started, done };
    });
    await Promise.all(inFlight.map((writer) => writer.started));
    await countRows(sql);
    for (const writer of inFlight) writer.release();
    await Promise.all(inFlight.map((writer) => writer.done));

    // Eight connections creating, expiring and deleting at once, some rolled back, while folds run.
    let writing = true;
    const folds = (async () => {
      while (writing) await foldRowCountChanges(sql);
    })();
    const writers = Promise.all(
      Array.from({ length: 8 }, async (_, writer) => {
        for (let round = 0; round < 15; round++) {
          await sql
            .begin(async (transaction) => {
              const ids = await insertClaims(transaction, 1 + (round % 4));
              await transaction`update app.claims set status = 'expired' where id = ${ids[0] as string}`;
              if (round % 5 === 0) {
                await transaction`delete from app.events where claim_id = ${ids[1] ?? ""}`;
                await transaction`delete from app.claims where id = ${ids[1] ?? ""}`;
              }
              if ((writer + round) % 6 === 0) throw new Error("rolled back");
            })
            .catch((error: Error) => {
              if (error.message !== "rolled back") throw error;
            });
        }
      }),
    );
    await writers.finally(() => {
      writing = false;
    });
    await folds;
    await expectExact();
  });

  it("never make two claim creations wait for each other", async () => {
    await countRows(sql);
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inserted: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      inserted = resolve;
    });
    const holder = sql.begin(async (transaction) => {
      await insertClaims(transaction, 1);
      inserted();
      await released;
    });
    await first;
    // The first creation's transaction is open: the second must not wait for anything it holds.
    await sql.begin(async (transaction) => {
      await transaction`set local lock_timeout = '200ms'`;
      await insertClaims(transaction, 1);
    });
    release();
    await holder;
    await expectExact();
  });

  it("are counted by the worker's first tick, then folded each tick", async () => {
    await insertClaims(sql, 4);
    const worker = createRowCountWorker({ sql, logger });
    await worker.tick();
    await insertClaims(sql, 2);
    await worker.tick();
    const [left] = await sql<{ n: number }[]>`select count(*)::int as n from app.row_count_changes`;
    expect(left?.n).toBe(0);
    expect((await readStatusCounts(sql)).claims.awaiting_payment).toBe(6);
  });

  it("work off a backlog a batch at a time, the worker folding again at once while batches come full", async () => {
    const worker = createRowCountWorker({ sql, logger });
    await worker.tick();
    const before = (await readStatusCounts(sql)).claims.expired;
    // 25,000 changes left by a worker stopped for a while: one claim expiring in each statement.
    await sql`
      insert into app.row_count_changes (counted, label, change)
      select 'claims', case when n % 2 = 0 then 'expired' else 'awaiting_payment' end,
        case when n % 2 = 0 then 1 else -1 end
      from generate_series(1, 25000) n`;
    await sql`
      insert into app.row_count_changes (counted, label, change)
      select 'claims', 'awaiting_payment', 12500`;

    const ticks = [await worker.tick(), await worker.tick(), await worker.tick()];

    expect(ticks).toEqual([true, true, false]);
    const [left] = await sql<{ n: number }[]>`select count(*)::int as n from app.row_count_changes`;
    expect(left?.n).toBe(0);
    expect((await readStatusCounts(sql)).claims.expired).toBe(before + 12500);
  });
});
