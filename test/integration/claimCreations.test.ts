import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { type Address, getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InsertClaimResult, NewClaim } from "../../api/claims/insertClaim.ts";
import { gatherClaimCreations } from "../../api/claims/openClaims.ts";
import { connectDatabase, type Database, type Sql } from "../../api/db/connect.ts";
import { releaseExpiredReservations } from "../../api/lifecycle/releaseReservations.ts";
import { createLogger } from "../../api/logger.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Claim creations gathered per turn of the event loop (POST /api/claims under many clients):
 * one call for a turn's creations, each claim born as it would be by itself (its own id and
 * unique amount, the open claim given back to the same request, the client's cap), and a call
 * that fails answered claim by claim instead.
 */

let database: TestDatabase;
let sql: Database;

function settings(variant: "A" | "B", openClaimsPerClient = 0) {
  return {
    claims: {
      variant,
      lifetimeSeconds: 3600 * 24 * 7,
      expiryGraceSeconds: 0,
      amountHoldSeconds: 60,
      amountSpaceSize: 999_999,
      amountSpaceWarnRatio: 0.5,
      openClaimsPerClient,
      expiryIntervalMs: 1000,
    },
  };
}

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 4 });
});

afterAll(async () => {
  await sql?.end({ timeout: 1 });
  await database?.drop();
});

/** The same database, every statement counted. */
function countedSql(): { sql: Sql; statements: () => number } {
  let statements = 0;
  const counted = new Proxy(sql, {
    apply(target, thisArgument, argumentsList) {
      statements += 1;
      return Reflect.apply(target, thisArgument, argumentsList);
    },
  });
  return { sql: counted, statements: () => statements };
}

/**
 * `on`, each call of app.create_claims run in a transaction of its own, after which `count`
 * reads what the transaction did (its pg_stat_xact_* views; functions are tracked).
 */
function inspectedCreations(on: Database, count: (transaction: Sql) => Promise<void>): Sql {
  return new Proxy(on, {
    apply(target, thisArgument, argumentsList) {
      const text = (argumentsList[0] as string[]).join("?");
      if (!text.includes("app.create_claims(")) {
        return Reflect.apply(target, thisArgument, argumentsList);
      }
      return on.begin(async (transaction) => {
        await transaction`set local track_functions = 'pl'`;
        const rows = await Reflect.apply(transaction, undefined, argumentsList);
        await count(transaction);
        return rows;
      });
    },
  });
}

/** The database, counting how many times app.create_claim (one claim's creation) ran. */
function perClaimCountedSql(): { sql: Sql; perClaimCalls: () => number } {
  let perClaimCalls = 0;
  const counted = inspectedCreations(sql, async (transaction) => {
    const [stats] = await transaction<{ calls: number }[]>`
      select coalesce(sum(calls), 0)::int as calls from pg_stat_xact_user_functions
      where schemaname = 'app' and funcname = 'create_claim'`;
    perClaimCalls += stats?.calls ?? 0;
  });
  return { sql: counted, perClaimCalls: () => perClaimCalls };
}

/** A logger whose lines are kept: a batch that fell back to one by one says so at warn or above. */
function keptLog() {
  const lines: { level: number; msg: string; claims?: number }[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: createLogger("warn", "test", sink), lines };
}

/** A gatherer on `on` (the database, or a scripted stand-in) that keeps what it logs. */
function gatherer(on: Sql, claimSettings: ReturnType<typeof settings>) {
  const log = keptLog();
  return { open: gatherClaimCreations(on, claimSettings, log.logger), log: log.lines };
}

const newAddress = (): Address => getAddress(`0x${randomBytes(20).toString("hex")}`);

function claimRequest(overrides: Partial<NewClaim> = {}): NewClaim {
  return {
    flow: "claim",
    payoutAddress: newAddress(),
    agentName: "batch",
    reuseMinLifeSeconds: 3600,
    ...overrides,
  };
}

type Created = Exclude<InsertClaimResult, { type: "too_many_open_claims" }>;

function created(result: InsertClaimResult): Created {
  if (result.type === "too_many_open_claims") throw new Error("not created");
  return result;
}

describe("gathered claim creations", () => {
  it("opens a turn's claims in one call, each with its own id and unique amount", async () => {
    const counted = countedSql();
    const { open, log } = gatherer(counted.sql, settings("A"));
    const requests = Array.from({ length: 40 }, () => claimRequest());

    const results = (await Promise.all(requests.map(open))).map(created);

    expect(counted.statements()).toBe(1);
    expect(log).toEqual([]);
    expect(results.map((result) => result.type)).toEqual(requests.map(() => "created"));
    expect(results.map((result) => result.claim.payoutAddress)).toEqual(
      requests.map((request) => request.payoutAddress.toLowerCase()),
    );
    expect(new Set(results.map((result) => result.claim.id)).size).toBe(40);
    const amounts = results.map((result) => result.claim.amountDue);
    expect(new Set(amounts).size).toBe(40);
    for (const amount of amounts) {
      expect(amount).toBeGreaterThan(PRICE_ATOMIC);
      expect(amount).toBeLessThan(PRICE_ATOMIC + 1_000_000n);
    }
    // Each claim holds its own amount, as a claim opened by itself does.
    const held = await sql<{ claim_id: string; amount: string }[]>`
      select claim_id, amount::text from app.amount_reservations
      where claim_id = any(${results.map((result) => result.claim.id)})`;
    expect(new Map(held.map((row) => [row.claim_id, BigInt(row.amount)]))).toEqual(
      new Map(results.map((result) => [result.claim.id, result.claim.amountDue])),
    );
  });

  it("gives the same request in the same turn the claim it opened, and a differing one its own", async () => {
    const { open } = gatherer(sql, settings("B"));
    const first = claimRequest();
    const again = { ...first };
    const otherName = { ...first, agentName: "another" };

    const [opened, reused, other] = (
      await Promise.all([open(first), open(again), open(otherName)])
    ).map(created) as [Created, Created, Created];

    expect(opened.type).toBe("created");
    expect(reused).toMatchObject({ type: "reused", claim: { id: opened.claim.id } });
    expect(other.type).toBe("created");
    expect(other.claim.id).not.toBe(opened.claim.id);
    expect(opened.claim.amountDue).toBe(PRICE_ATOMIC);
  });

  it("holds a client to its cap of open claims within one call", async () => {
    const counted = countedSql();
    const { open } = gatherer(counted.sql, settings("A", 3));
    const clientKey = randomBytes(16).toString("hex");

    const results = await Promise.all(
      Array.from({ length: 6 }, () => open(claimRequest({ clientKey }))),
    );

    expect(counted.statements()).toBe(1);
    expect(results.map((result) => result.type)).toEqual([
      "created",
      "created",
      "created",
      "too_many_open_claims",
      "too_many_open_claims",
      "too_many_open_claims",
    ]);
    const [open_] = await sql<{ n: number }[]>`
      select count(*)::int as n from app.claims where client_key = ${clientKey}`;
    expect(open_?.n).toBe(3);
  });

  it("creates a call of different payout addresses together, and one naming an address twice claim by claim", async () => {
    const counted = perClaimCountedSql();
    const { open, log } = gatherer(counted.sql, settings("A"));

    const apart = Array.from({ length: 8 }, () => claimRequest());
    const together = (await Promise.all(apart.map(open))).map(created);
    expect(counted.perClaimCalls()).toBe(0);

    const payoutAddress = newAddress();
    const twice = (
      await Promise.all([
        open(claimRequest({ payoutAddress })),
        open(claimRequest({ payoutAddress, agentName: "other" })),
        open(claimRequest()),
      ])
    ).map(created);
    expect(counted.perClaimCalls()).toBe(3);

    expect(log).toEqual([]);
    expect([...together, ...twice].map((result) => result.type)).toEqual(
      Array.from({ length: 11 }, () => "created"),
    );
    const amounts = [...together, ...twice].map((result) => result.claim.amountDue);
    expect(new Set(amounts).size).toBe(11);
    expect(amounts.every((amount) => amount > PRICE_ATOMIC)).toBe(true);
  });

  it("gives back in a later call the claims an earlier one opened, and holds the cap counting only the new", async () => {
    const counted = countedSql();
    const { open } = gatherer(counted.sql, settings("A", 4));
    const clientKey = randomBytes(16).toString("hex");
    const earlier = [claimRequest({ clientKey }), claimRequest({ clientKey })];
    const opened = (await Promise.all(earlier.map(open))).map(created);

    // Asked again (given back, not counted), then four new claims for a cap of four with two open.
    const later = [
      { ...(earlier[0] as NewClaim) },
      ...Array.from({ length: 4 }, () => claimRequest({ clientKey })),
      { ...(earlier[1] as NewClaim) },
    ];
    const results = await Promise.all(later.map(open));

    expect(counted.statements()).toBe(2);
    expect(results.map((result) => result.type)).toEqual([
      "reused",
      "created",
      "created",
      "too_many_open_claims",
      "too_many_open_claims",
      "reused",
    ]);
    expect(created(results[0] as InsertClaimResult).claim).toEqual(opened[0]?.claim);
    expect(created(results[5] as InsertClaimResult).claim).toEqual(opened[1]?.claim);
    const [stored] = await sql<{ n: number }[]>`
      select count(*)::int as n from app.claims where client_key = ${clientKey}`;
    expect(stored?.n).toBe(4);
  });

  it("answers every claim of a call once when its amounts are taken, the one held past its time taken over", async () => {
    // A space of one amount, held by a claim whose hold has run out: every claim's first (and
    // only) candidate is taken. The first claim takes the hold over; the others find nothing
    // free and ask for the price.
    const single = settings("A");
    single.claims.amountSpaceSize = 1;
    const amount = PRICE_ATOMIC + 1n;
    const holder = created(await gatherer(sql, single).open(claimRequest()));
    await sql`
      update app.amount_reservations set held_until = now() - interval '1 second'
      where amount = ${String(amount)}`;
    const { open, log } = gatherer(sql, single);
    const requests = Array.from({ length: 4 }, () => claimRequest());

    const results = (await Promise.all(requests.map(open))).map(created);

    expect(log).toEqual([]);
    expect(results.map((result) => result.claim.payoutAddress)).toEqual(
      requests.map((request) => request.payoutAddress.toLowerCase()),
    );
    expect(results.map((result) => result.claim.amountDue)).toEqual([
      amount,
      PRICE_ATOMIC,
      PRICE_ATOMIC,
      PRICE_ATOMIC,
    ]);
    const [hold] = await sql<{ claim_id: string }[]>`
      select claim_id from app.amount_reservations where amount = ${String(amount)}`;
    expect(hold?.claim_id).toBe(results[0]?.claim.id);
    expect(hold?.claim_id).not.toBe(holder.claim.id);
  });

  it("opens a call's claims one by one when the call fails, and says so", async () => {
    const counted = countedSql();
    const { open, log } = gatherer(counted.sql, settings("A"));
    const requests = Array.from({ length: 5 }, () => claimRequest());
    // The batch function gone for a moment: the call fails before it does anything.
    await sql`alter function app.create_claims(jsonb, integer, numeric, bigint) rename to create_claims_away`;
    let results: InsertClaimResult[];
    try {
      results = await Promise.all(requests.map(open));
    } finally {
      await sql`alter function app.create_claims_away(jsonb, integer, numeric, bigint) rename to create_claims`;
    }

    // The call, the look for what it committed, and one creation each.
    expect(counted.statements()).toBe(2 + requests.length);
    // Not a timeout, a lost connection or a deadlock: a fault to look at.
    expect(log).toMatchObject([{ level: 50, claims: 5 }]);
    expect(results.map((result) => created(result).claim.payoutAddress)).toEqual(
      requests.map((request) => request.payoutAddress.toLowerCase()),
    );
    const [stored] = await sql<{ n: number }[]>`
      select count(*)::int as n from app.claims
      where payout_address = any(${requests.map((request) => request.payoutAddress.toLowerCase())})`;
    expect(stored?.n).toBe(requests.length);
  });

  it("sends a creation asked for alone by itself, and one asked for later in a call of its own", async () => {
    const counted = countedSql();
    const { open } = gatherer(counted.sql, settings("B"));

    const alone = created(await open(claimRequest()));
    const [later] = await Promise.all([open(claimRequest())]);

    expect(alone.type).toBe("created");
    expect(created(later as InsertClaimResult).type).toBe("created");
    expect(counted.statements()).toBe(2);
  });

  it("holds every client's cap across two replicas creating for the same clients and addresses at once", async () => {
    const gatherers = [gatherer(sql, settings("A", 4)), gatherer(sql, settings("A", 4))];
    const replicas = gatherers.map((replica) => replica.open);
    const clients = Array.from({ length: 5 }, () => randomBytes(16).toString("hex"));
    const addresses = Array.from({ length: 7 }, newAddress);
    // Distinct agent names: no request is the same as another, so none is given back.
    const requests = Array.from({ length: 300 }, (_, index) =>
      claimRequest({
        clientKey: clients[index % clients.length] as string,
        payoutAddress: addresses[index % addresses.length] as Address,
        agentName: `replica-${index}`,
      }),
    );

    const results = await Promise.all(
      requests.map((request, index) => (replicas[index % 2] as (typeof replicas)[0])(request)),
    );

    const opened = await sql<{ client_key: string; n: number }[]>`
      select client_key, count(*)::int as n from app.claims
      where client_key = any(${clients}) group by client_key`;
    expect(opened.map((row) => row.n)).toEqual(clients.map(() => 4));
    // Every batch went through as one: none fell back to one by one.
    expect(gatherers.flatMap((replica) => replica.log)).toEqual([]);
    expect(results.filter((result) => result.type === "created")).toHaveLength(20);
    expect(results.filter((result) => result.type === "too_many_open_claims")).toHaveLength(280);
  });

  it("answers each claim of a call whose answer was lost after it committed, opening none twice", async () => {
    let callsLost = 0;
    // The call reaches the database and commits; its answer never comes back.
    const losing = new Proxy(sql, {
      apply(target, thisArgument, argumentsList) {
        const query = Reflect.apply(target, thisArgument, argumentsList) as Promise<unknown>;
        const text = (argumentsList[0] as string[]).join("?");
        if (!text.includes("app.create_claims(")) return query;
        return query.then(() => {
          callsLost += 1;
          throw Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" });
        });
      },
    });
    const { open, log } = gatherer(losing, settings("A"));
    const requests = Array.from({ length: 6 }, (_, index) =>
      claimRequest({ flow: index % 2 ? "mail" : "claim", reuseMinLifeSeconds: undefined }),
    );

    const results = (await Promise.all(requests.map(open))).map(created);

    expect(callsLost).toBe(1);
    expect(log).toMatchObject([{ level: 40, claims: 6 }]);
    expect(results.map((result) => result.type)).toEqual(requests.map(() => "created"));
    const stored = await sql<{ id: string; payout_address: string }[]>`
      select id, payout_address from app.claims
      where payout_address = any(${requests.map((request) => request.payoutAddress.toLowerCase())})`;
    expect(stored).toHaveLength(requests.length);
    expect(new Set(stored.map((row) => row.id))).toEqual(
      new Set(results.map((result) => result.claim.id)),
    );
  });

  it("never has two replicas' batches, or a batch and the sweeper, wait for each other in a crowded amount space", async () => {
    const crowded = settings("A");
    crowded.claims.amountSpaceSize = 300;
    // Half the space held by claims whose holds have run out: creations take those rows over
    // while the sweeper deletes them.
    const old = gatherer(sql, crowded);
    const expiring = (
      await Promise.all(Array.from({ length: 150 }, () => old.open(claimRequest())))
    ).map(created);
    await sql`
      update app.amount_reservations set held_until = now() - interval '1 second'
      where claim_id = any(${expiring.map((result) => result.claim.id)})`;
    const replicas = [gatherer(sql, crowded), gatherer(sql, crowded)];
    let sweeping = true;
    const sweeper = (async () => {
      while (sweeping) await releaseExpiredReservations(sql);
    })();

    const results = await Promise.all(
      Array.from({ length: 240 }, (_, index) =>
        (replicas[index % 2] as (typeof replicas)[0]).open(claimRequest()),
      ),
    ).finally(() => {
      sweeping = false;
    });
    await sweeper;

    // No batch fell back to one by one (a deadlock, a lock timeout): nothing was logged.
    expect([...old.log, ...replicas.flatMap((replica) => replica.log)]).toEqual([]);
    const opened = results.map(created);
    expect(opened).toHaveLength(240);
    // No two open claims ask for the same unique amount.
    const unique = opened.filter((result) => result.claim.amountDue !== PRICE_ATOMIC);
    expect(new Set(unique.map((result) => result.claim.amountDue)).size).toBe(unique.length);
  });

  it.each([
    { table: "new, never analyzed", analyzedAt: 0 },
    { table: "analyzed while it held a few claims", analyzedAt: 5 },
  ])(
    "creates crowded batches without scanning every claim or amount, the table $table",
    async ({ analyzedAt }) => {
      // A new database, as in a new deployment: this session's generic plans are made while the
      // table is small, with no statistics (a join became a scan of every claim) or with
      // statistics of a few rows (a lookup by id became a scan). They are kept until the
      // statistics change, whatever the table grows to.
      const fresh = await createTestDatabase();
      const session = connectDatabase(fresh.url, { max: 1 });
      try {
        let claimScans = 0;
        let amountTakes = 0;
        const counted = inspectedCreations(session, async (transaction) => {
          const [stats] = await transaction<{ scans: number; takes: number }[]>`
          select
            (select coalesce(sum(seq_scan), 0) from pg_stat_xact_user_tables
              where schemaname = 'app' and relname in ('claims', 'amount_reservations'))::int
              as scans,
            (select coalesce(sum(calls), 0) from pg_stat_xact_user_functions
              where schemaname = 'app' and funcname = 'take_claim_amount')::int as takes`;
          claimScans += stats?.scans ?? 0;
          amountTakes += stats?.takes ?? 0;
        });
        // A space of 64 amounts for 48 claims: first candidates collide in nearly every turn.
        const crowded = settings("A");
        crowded.claims.amountSpaceSize = 64;
        const { open, log } = gatherer(counted, crowded);
        if (analyzedAt > 0) {
          await Promise.all(Array.from({ length: analyzedAt }, () => open(claimRequest())));
          await session`analyze app.claims, app.amount_reservations`;
          claimScans = 0;
        }

        for (let turn = 0; turn < 3; turn += 1) {
          const results = await Promise.all(Array.from({ length: 16 }, () => open(claimRequest())));
          expect(results.map((result) => result.type)).toEqual(results.map(() => "created"));
        }

        expect(log).toEqual([]);
        expect(amountTakes).toBeGreaterThan(0);
        expect(claimScans).toBe(0);
        // Their settings are part of their definition (api/db/definitions/claim_creation.sql).
        expect(
          await session`
          select proname, proconfig from pg_proc
          where pronamespace = 'app'::regnamespace
            and proname in ('create_claim', 'create_claims', 'take_claim_amount')
          order by proname`,
        ).toEqual(
          ["create_claim", "create_claims", "take_claim_amount"].map((proname) => ({
            proname,
            proconfig: ["plan_cache_mode=force_generic_plan", "enable_seqscan=off"],
          })),
        );
      } finally {
        await session.end({ timeout: 1 });
        await fresh.drop();
      }
    },
  );

  it("keeps its statistics up with the open claims it makes, so a creation never walks every open claim", async () => {
    // A new deployment: autovacuum's first analyze of app.claims comes while it holds only finished
    // claims (the bench's 25 seeded payouts). The generic plans made next take `awaiting_payment`
    // for rare and answer the reuse lookup (app.claim_to_reuse) by walking claims_by_status
    // backwards through every open claim, for every claim created, until the next analyze, a minute
    // later (BENCHMARKS.md#claim-creation-in-postgresql). The gatherer analyzes the table itself as
    // the creations asked of it double.
    const fresh = await createTestDatabase();
    const session = connectDatabase(fresh.url, { max: 1 });
    try {
      // A long-running service: autovacuum analyzes after a fixed number of changes (0017), not
      // after a tenth of the table.
      expect(
        await session`
          select relname, reloptions from pg_class
          where oid in ('app.claims'::regclass, 'app.amount_reservations'::regclass)
          order by relname`,
      ).toEqual(
        ["amount_reservations", "claims"].map((relname) => ({
          relname,
          reloptions: ["autovacuum_analyze_scale_factor=0.01", "autovacuum_analyze_threshold=1000"],
        })),
      );
      // Only this test's analyzes, never autovacuum's at a moment of its own.
      await session`alter table app.claims set (autovacuum_enabled = false)`;
      // What the walk reads: claims_by_status's entries, from the server's counters (this
      // session's flushed first: the pg_stat_xact views hold whatever is not flushed yet).
      const statusIndexReads = async () => {
        await session`select pg_stat_force_next_flush()`;
        const [row] = await session<{ read: number }[]>`
          select idx_tup_read::int as read from pg_stat_user_indexes
          where schemaname = 'app' and indexrelname = 'claims_by_status'`;
        return row?.read ?? 0;
      };
      const finished = gatherer(session, settings("B"));
      await Promise.all(Array.from({ length: 25 }, () => finished.open(claimRequest())));
      await session`update app.claims set status = 'expired'`;
      await session`analyze app.claims`;
      const analyzes = async () => {
        const [row] = await session<{ count: number }[]>`
          select analyze_count::int as count from pg_stat_user_tables
          where schemaname = 'app' and relname = 'claims'`;
        return row?.count ?? 0;
      };
      const analyzedBefore = await analyzes();

      const { open, log } = gatherer(session, settings("B"));
      const turn = async () => {
        const before = await statusIndexReads();
        const results = await Promise.all(Array.from({ length: 16 }, () => open(claimRequest())));
        expect(results.map((result) => result.type)).toEqual(results.map(() => "created"));
        return (await statusIndexReads()) - before;
      };
      // 128 claims: the gatherer's doublings at 64 and 128 ask for an analyze each.
      for (let made = 0; made < 128; made += 16) await turn();
      await waitFor(async () => (await analyzes()) > analyzedBefore, {
        what: "the gatherer's analyze of app.claims",
        timeoutMs: 5000,
      });
      // Each claim's reuse lookup reads its own payout address's open claims, not all of them.
      expect([await turn(), await turn()]).toEqual([0, 0]);
      expect(log).toEqual([]);
    } finally {
      await session.end({ timeout: 1 });
      await fresh.drop();
    }
  });

  it("keeps the order claims were asked in within a call, a claim and a mail claim alike", async () => {
    const { open } = gatherer(sql, settings("A"));
    const payoutAddress = newAddress();
    const requests: NewClaim[] = [
      claimRequest({ payoutAddress, agentName: "first" }),
      claimRequest({ payoutAddress, flow: "mail", reuseMinLifeSeconds: undefined }),
      claimRequest({ payoutAddress, agentName: "first" }),
      claimRequest({ payoutAddress, agentName: "third" }),
    ];

    const [first, mail, again, third] = (await Promise.all(requests.map(open))).map(created) as [
      Created,
      Created,
      Created,
      Created,
    ];

    expect(again).toMatchObject({ type: "reused", claim: { id: first.claim.id } });
    expect(mail.claim.flow).toBe("mail");
    expect(first.claim.createdAt.getTime()).toBeLessThanOrEqual(mail.claim.createdAt.getTime());
    const ordered = await sql<{ id: string }[]>`
      select id from app.claims where payout_address = ${payoutAddress.toLowerCase()}
      order by created_at, id`;
    expect(ordered.map((row) => row.id)).toEqual(
      [first, mail, third].map((result) => result.claim.id),
    );
  });

  it("settles every creation of a call whose arguments cannot even be made", async () => {
    const broken = settings("A");
    // No amount can be drawn from an empty space: making the arguments throws.
    broken.claims.amountSpaceSize = 0;
    const { open } = gatherer(sql, broken);

    const outcomes = await Promise.allSettled(
      Array.from({ length: 3 }, () => open(claimRequest())),
    );

    expect(outcomes.map((outcome) => outcome.status)).toEqual(["rejected", "rejected", "rejected"]);
  });

  it("gives a claim in a crowded space its first free candidate with its insert, alone and in a call", async () => {
    // 24 amounts held by other claims, each candidate list those 24 and then one free amount: a
    // year's space, 95% held, makes this the common case. The free amount is found by one read
    // of the candidates, and the claim is written with it: app.take_claim_amount (a statement
    // per candidate) is not called.
    const base = PRICE_ATOMIC + 500_000n;
    const held = Array.from({ length: 24 }, (_, index) => String(base + BigInt(index)));
    await sql.begin(async (transaction) => {
      await transaction`
        insert into app.claims (id, flow, payout_address, amount_due, expires_at)
        select 'cl_crowd_' || amount, 'claim', ${newAddress().toLowerCase()}, amount::numeric,
          now() + interval '1 hour'
        from unnest(${held}::text[]) amount`;
      await transaction`
        insert into app.amount_reservations (amount, claim_id, held_until)
        select amount::numeric, 'cl_crowd_' || amount, now() + interval '1 hour'
        from unnest(${held}::text[]) amount`;
    });
    const free = (offset: bigint) => String(base + 100n + offset);
    const takes = async (transaction: Sql) => {
      const [row] = await transaction<{ calls: number }[]>`
        select coalesce(sum(calls), 0)::int as calls from pg_stat_xact_user_functions
        where schemaname = 'app' and funcname = 'take_claim_amount'`;
      return row?.calls ?? 0;
    };
    const heldUntil = new Date(Date.now() + 3_600_000).toISOString();
    const expiresAt = new Date(Date.now() + 1_800_000).toISOString();

    const alone = await sql.begin(async (transaction) => {
      await transaction`set local track_functions = 'pl'`;
      const [row] = await transaction<{ amount_due: string }[]>`
        select amount_due::text from app.create_claim(
          'cl_crowd_alone', 'claim', ${newAddress().toLowerCase()}, null, null, null, 0, null,
          4242, ${String(PRICE_ATOMIC)}, ${expiresAt}, ${heldUntil},
          ${[...held, free(0n)]}::numeric[])`;
      return { amount: row?.amount_due, takes: await takes(transaction) };
    });
    expect(alone).toEqual({ amount: free(0n), takes: 0 });

    const call = await sql.begin(async (transaction) => {
      await transaction`set local track_functions = 'pl'`;
      const claims = [1n, 2n].map((offset, position) => ({
        position,
        id: `cl_crowd_call_${offset}`,
        flow: "claim",
        payout_address: newAddress().toLowerCase(),
        cap: 0,
        expires_at: expiresAt,
        held_until: heldUntil,
        amounts: [...held.slice(offset === 1n ? 0 : 12), ...held.slice(0, 12), free(offset)],
      }));
      const rows = await transaction<{ position: number; amount_due: string }[]>`
        select "position", amount_due::text from app.create_claims(
          ${transaction.json(claims)}, 4242, ${String(PRICE_ATOMIC)}, 4243)
        order by "position"`;
      return { rows, takes: await takes(transaction) };
    });
    expect(call).toEqual({
      rows: [
        { position: 0, amount_due: free(1n) },
        { position: 1, amount_due: free(2n) },
      ],
      takes: 0,
    });
    const reservations = await sql<{ amount: string; claim_id: string }[]>`
      select amount::text, claim_id from app.amount_reservations
      where amount in (${free(0n)}, ${free(1n)}, ${free(2n)}) order by amount`;
    expect(reservations).toEqual([
      { amount: free(0n), claim_id: "cl_crowd_alone" },
      { amount: free(1n), claim_id: "cl_crowd_call_1" },
      { amount: free(2n), claim_id: "cl_crowd_call_2" },
    ]);
  });
});
