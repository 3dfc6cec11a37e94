import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CreatedRow,
  type CreationArguments,
  insertClaimWith,
} from "../../api/claims/insertClaim.ts";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { pruneEvents } from "../../api/webhooks/eventRetention.ts";
import { LOCK_KEYS } from "../../api/workers/lockKeys.ts";
import { createTestDatabase, type TestDatabase, withOwnDatabase } from "../support/database.ts";

/**
 * The events' outbox in the database: the triggers (api/db/definitions/events.sql) as the
 * database runs them (what a claim.created event tells the payer to send, how the triggers find
 * their claims), and the retention that deletes old events (api/webhooks/eventRetention.ts).
 */

let database: TestDatabase;
let sql: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 4 });
});

afterAll(async () => {
  await sql?.end({ timeout: 1 });
  await database?.drop();
});

function claimArguments(amounts: string[]): CreationArguments {
  const expiresAt = new Date(Date.now() + 3_600_000);
  return {
    id: `cl_${randomBytes(8).toString("hex")}`,
    flow: "claim",
    payout_address: `0x${randomBytes(20).toString("hex")}`,
    email: null,
    agent_name: null,
    client_key: null,
    cap: 0,
    reuse_min_life_seconds: null,
    expires_at: expiresAt,
    held_until: new Date(expiresAt.getTime() + 60_000),
    amounts,
  };
}

/** A candidate amount no test has used: the price and a few random atomic units. */
function freshAmount(): string {
  return String(PRICE_ATOMIC + BigInt(1 + Math.floor(Math.random() * 999_998)));
}

/**
 * `count` claims written in one statement (their `claim.created` events with them), the events
 * then fanned out and analyzed: a table's statistics as a database that has served a while has them.
 */
async function insertFannedOutClaims(on: Database, prefix: string, count: number): Promise<void> {
  await on`
    insert into app.claims (id, flow, payout_address, amount_due, expires_at)
    select ${prefix} || n, 'claim', '0x' || lpad(to_hex(n), 40, '0'), ${String(PRICE_ATOMIC)},
      now() + interval '1 hour'
    from generate_series(1, ${count}::int) n`;
  await on`update app.events set fanned_out = true`;
  await on`analyze app.events`;
}

async function createdEventAmount(claimId: string): Promise<string> {
  const events = await sql<{ type: string; amount_due: string }[]>`
    select type, snapshot->>'amount_due' as amount_due from app.events
    where claim_id = ${claimId} order by id`;
  expect(events.map((event) => event.type)).toEqual(["claim.created"]);
  return (events[0] as { amount_due: string }).amount_due;
}

describe("claim.created", () => {
  it("tells the amount taken when the claim's first candidate was held by another claim", async () => {
    const held = freshAmount();
    const next = freshAmount();
    const first = await insertClaimWith(sql, claimArguments([held]));
    expect(first.type === "created" && String(first.claim.amountDue)).toBe(held);

    const second = await insertClaimWith(sql, claimArguments([held, next]));
    if (second.type !== "created") throw new Error(`expected a creation, got ${second.type}`);
    // The claim answers the amount taken; the event must tell the payer the same, not the price
    // it was inserted with before its amount was taken.
    expect(String(second.claim.amountDue)).toBe(next);
    expect(await createdEventAmount(second.claim.id)).toBe(next);
  });

  it("tells the amount taken in a batch whose claim found its first candidate held", async () => {
    const held = freshAmount();
    const next = freshAmount();
    await insertClaimWith(sql, claimArguments([held]));
    const batch = [claimArguments([freshAmount()]), claimArguments([held, next])];
    const rows = await sql<(CreatedRow & { position: number })[]>`
      select * from app.create_claims(
        ${sql.json(
          batch.map((claim, position) => ({
            position,
            ...claim,
            expires_at: claim.expires_at.toISOString(),
            held_until: claim.held_until.toISOString(),
          })),
        )},
        ${LOCK_KEYS.claimCreation}, ${String(PRICE_ATOMIC)}, ${LOCK_KEYS.claimBatches})`;
    const short = rows.find((row) => row.position === 1);
    expect(short?.outcome).toBe("created");
    expect(String(short?.amount_due)).toBe(next);
    expect(await createdEventAmount((batch[1] as CreationArguments).id)).toBe(next);
  });

  it("holds the claim as app.claim_details has it, key for key", async () => {
    const created = await insertClaimWith(sql, {
      ...claimArguments([freshAmount()]),
      email: "payer@example.com",
      agent_name: "agent",
    });
    if (created.type !== "created") throw new Error(`expected a creation, got ${created.type}`);
    const [compared] = await sql<{ event: unknown; view: unknown }[]>`
      select e.snapshot as event, app.claim_snapshot(to_jsonb(d)) as view
      from app.events e join app.claim_details d on d.id = e.claim_id
      where e.claim_id = ${created.claim.id} and e.type = 'claim.created'`;
    expect(compared?.event).toEqual(compared?.view);
    expect(compared?.event).toMatchObject({ has_email: true, agent_name: "agent" });
  });

  it("keeps the price when no candidate is free, as the claim does", async () => {
    const held = freshAmount();
    await insertClaimWith(sql, claimArguments([held]));
    const crowded = await insertClaimWith(sql, claimArguments([held]));
    if (crowded.type !== "created") throw new Error(`expected a creation, got ${crowded.type}`);
    expect(String(crowded.claim.amountDue)).toBe(String(PRICE_ATOMIC));
    expect(await createdEventAmount(crowded.claim.id)).toBe(String(PRICE_ATOMIC));
  });
});

describe("the triggers' plans", () => {
  it("find a single claim's details by index after a bulk change planned them on many claims", async () => {
    await sql.begin(async (transaction) => {
      await transaction`
        insert into app.claims (id, flow, payout_address, amount_due, expires_at)
        select 'cl_bulk_' || n, 'claim', '0x' || lpad(to_hex(n), 40, '0'), ${String(PRICE_ATOMIC)},
          now() - interval '1 minute'
        from generate_series(1, 20000) n`;
    });
    await sql`analyze app.claims`;
    // One session: the triggers' plans are made on its first calls, an expiry of every bulk claim
    // and then their creations' counterpart, and kept for the calls after.
    const session = await sql.reserve();
    try {
      await session`
        update app.claims set status = 'expired'
        where id like 'cl_bulk_%' and status = 'awaiting_payment'`;
      await session`
        insert into app.claims (id, flow, payout_address, amount_due, expires_at)
        select 'cl_bulk2_' || n, 'claim', '0x' || lpad(to_hex(n), 40, '1'), ${String(PRICE_ATOMIC)},
          now() + interval '1 hour'
        from generate_series(1, 20000) n`;
      const single = claimArguments([]);
      // pg_stat_xact_user_tables counts this session's reads not yet reported: what the change
      // added is the difference. By index probes, a claim's change reads a few rows of each
      // table; a plan kept from the bulk change would read them all.
      const rowsRead = () => session<{ relname: string; rows: number }[]>`
        select relname, (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as rows
        from pg_stat_xact_user_tables
        where schemaname = 'app' and relname in ('claims', 'events', 'payments', 'payouts')
        order by relname`;
      await session`begin`;
      const before = await rowsRead();
      await session`
        insert into app.claims (id, flow, payout_address, amount_due, expires_at)
        values (${single.id}, 'claim', ${single.payout_address}, ${String(PRICE_ATOMIC)},
          now() + interval '1 hour')`;
      await session`update app.claims set status = 'expired' where id = ${single.id}`;
      const after = await rowsRead();
      await session`commit`;
      expect(
        await sql`select type from app.events where claim_id = ${single.id} order by id`,
      ).toEqual([{ type: "claim.created" }, { type: "claim.expired" }]);
      expect(after.map((table) => table.relname)).toEqual([
        "claims",
        "events",
        "payments",
        "payouts",
      ]);
      const read = after.map((table, index) => ({
        table: table.relname,
        rows: table.rows - (before[index]?.rows ?? 0),
      }));
      expect(read.filter((table) => table.rows > 10)).toEqual([]);
    } finally {
      session.release();
    }
  });
});

describe("a claim's amount taken after its insert", () => {
  it("rewrites its created event by the claim's own index, whatever fan-out backlog the statistics missed", async () => {
    // A database of its own: its events' statistics are made while every event is fanned out,
    // then a backlog of 20,000 waits (the fan-out stalled), which no analyze has seen.
    await withOwnDatabase(async (own) => {
      await own`alter table app.events set (autovacuum_enabled = false)`;
      await insertFannedOutClaims(own, "cl_backlog_", 20_000);
      await own`update app.events set fanned_out = false`;
      const single = claimArguments([]);
      await own`
        insert into app.claims (id, flow, payout_address, amount_due, expires_at)
        values (${single.id}, 'claim', ${single.payout_address}, ${String(PRICE_ATOMIC)},
          now() + interval '1 hour')`;
      const amount = freshAmount();

      // What app.take_claim_amount does once it has the amount; the events it read, from this
      // session's counters (which still hold its earlier statements' reads, not yet reported:
      // what the update added is the difference).
      const eventsRead = await own.begin(async (transaction) => {
        const read = async () => {
          const [row] = await transaction<{ rows: number }[]>`
            select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as rows
            from pg_stat_xact_user_tables where schemaname = 'app' and relname = 'events'`;
          return row?.rows ?? 0;
        };
        const before = await read();
        await transaction`update app.claims set amount_due = ${amount} where id = ${single.id}`;
        return (await read()) - before;
      });

      const [event] = await own<{ type: string; amount_due: string }[]>`
        select type, snapshot->>'amount_due' as amount_due from app.events
        where claim_id = ${single.id} order by id`;
      expect(event).toEqual({ type: "claim.created", amount_due: amount });
      expect(eventsRead).toBeLessThan(10);
    });
  });
});

describe("retention", () => {
  it("reads only the events old enough, never every event kept to find none", async () => {
    // A database of its own at retention's steady state: 20,000 fanned-out events, all younger
    // than EVENT_RETENTION_DAYS, analyzed. A walk by id read every one of them on each tick
    // (1.9 million at a year: BENCHMARKS.md#a-year-of-traffic).
    await withOwnDatabase(async (own) => {
      await insertFannedOutClaims(own, "cl_kept_", 20_000);
      await own`analyze app.webhook_deliveries`;
      const eventsRead = async () => {
        await own`select pg_stat_force_next_flush()`;
        const [row] = await own<{ rows: number }[]>`
          select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as rows
          from pg_stat_user_tables where relname = 'events'`;
        return row?.rows ?? 0;
      };
      const before = await eventsRead();

      const pruned = await pruneEvents(own, { retentionMs: 30 * 86_400_000 });

      expect(pruned).toBe(0);
      expect((await eventsRead()) - before).toBeLessThan(100);
    });
  });

  it("deletes old events and their deliveries once nothing is pending, and nothing else", async () => {
    const claim = await insertClaimWith(sql, claimArguments([freshAmount()]));
    if (claim.type !== "created") throw new Error(`expected a creation, got ${claim.type}`);
    const claimId = claim.claim.id;
    await sql`
      insert into app.webhook_endpoints (id, kind, url, secret, claim_id)
      values (${`we_${claimId}`}, 'claim', 'https://hooks.example/', 'whsec_x', ${claimId})`;
    // Four more events of the claim, as a life would write them; each to be delivered.
    const ids = await sql<{ id: bigint }[]>`
      insert into app.events (type, claim_id, ordering_key, snapshot, fanned_out, occurred_at)
      select t, ${claimId}, ${claimId}, '{}'::jsonb, true, now() - make_interval(days => d)
      from (values ('claim.paid', 40), ('claim.paying', 40), ('claim.completed', 31),
        ('claim.failed', 1)) as v (t, d)
      returning id`;
    const [paid, paying, completed, recent] = ids.map((row) => row.id) as [
      bigint,
      bigint,
      bigint,
      bigint,
    ];
    await sql`
      insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key, status)
      values (${String(paid)}, ${`we_${claimId}`}, ${claimId}, 'delivered'),
        (${String(paying)}, ${`we_${claimId}`}, ${claimId}, 'pending'),
        (${String(completed)}, ${`we_${claimId}`}, ${claimId}, 'failed'),
        (${String(recent)}, ${`we_${claimId}`}, ${claimId}, 'failed')`;
    // An old event not fanned out yet is owed to endpoints that may want it: kept.
    const [unfanned] = await sql<{ id: bigint }[]>`
      insert into app.events (type, claim_id, ordering_key, snapshot, occurred_at)
      values ('claim.expired', ${claimId}, ${claimId}, '{}'::jsonb, now() - interval '60 days')
      returning id`;

    const pruned = await pruneEvents(sql, { retentionMs: 30 * 86_400_000, batch: 1 });
    expect(pruned).toBe(2);
    const left = await sql<{ id: bigint }[]>`
      select id from app.events where claim_id = ${claimId} order by id`;
    const created = left[0]?.id;
    expect(left.map((row) => row.id)).toEqual([created, paying, recent, unfanned?.id]);
    const deliveries = await sql<{ event_id: bigint; status: string }[]>`
      select event_id, status from app.webhook_deliveries
      where endpoint_id = ${`we_${claimId}`} order by event_id`;
    expect(deliveries).toEqual([
      { event_id: paying, status: "pending" },
      { event_id: recent, status: "failed" },
    ]);
    // The claim itself is the money's history: kept.
    expect(await sql`select id from app.claims where id = ${claimId}`).toHaveLength(1);
  });
});
