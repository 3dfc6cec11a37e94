import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAmountSpaceFill } from "../../api/claims/reserveAmount.ts";
import type { Database } from "../../api/db/connect.ts";
import { countRows } from "../../api/db/rowCounts.ts";
import { readPayoutBacklog } from "../../api/health/readBacklog.ts";
import { listLedgerEntries } from "../../api/ledger/listLedgerEntries.ts";
import { recordStaleSettlingsUnknown } from "../../api/lifecycle/x402Records.ts";
import { readMailCounts, readOutboxStatus } from "../../api/mailbox/mailStatus.ts";
import { readStatusCounts } from "../../api/metrics/readStatusCounts.ts";
import { readPayoutCounts } from "../../api/payouts/payoutFunding.ts";
import { hasUnfinishedPayouts, readUnfinishedPayouts } from "../../api/payouts/readPayouts.ts";
import { readSettlementsToWatch, readUnknownSettlements } from "../../api/x402/watchSettlements.ts";
import { capturingConnection, wholeTableReads } from "../../scripts/bench/queryPlans.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

/**
 * What the workers and the health check ask every second or every signing round: each statement
 * must find its rows by an index that limits them (a condition, or a partial index), never read
 * a table that grows with traffic from end to end, as it would on a year's database (bench:scale
 * found several that did: BENCHMARKS.md#a-year-of-traffic). A test database holds a few rows, on
 * which the planner rightly prefers to scan; with sequential scans off, the plan it makes is what
 * the indexes allow. Only statements whose index follows from their own condition are here:
 * where the plan turns on how many rows the statistics promise (the expiry worker's released
 * reservations, joined back by amount), bench:scale's plans on the year are the check.
 */

let database: TestDatabase;
let connection: ReturnType<typeof capturingConnection>;

beforeAll(async () => {
  database = await createTestDatabase();
  connection = capturingConnection(database.url);
});

afterAll(async () => {
  await connection?.sql.end();
  await database?.drop();
});

/** The growing tables that the statements `run` sends read whole. */
async function wholeReadsOf(run: (sql: Database) => Promise<unknown>): Promise<string[]> {
  const statements = await connection.capture(run);
  expect(statements.length).toBeGreaterThan(0);
  return connection.sql.begin(async (transaction) => {
    await transaction`set local enable_seqscan = off`;
    const found: string[] = [];
    for (const statement of statements) {
      found.push(...(await wholeTableReads(transaction, statement)));
    }
    return found;
  });
}

describe("the hot background statements", () => {
  it.each([
    [
      "the payout funding counts (each signing round and health check)",
      (db: Database) => readPayoutCounts(db, 0n),
    ],
    [
      "the x402 watcher's stale settlings (every second)",
      (db: Database) => recordStaleSettlingsUnknown(db, 30_000),
    ],
    ["the confirmer's unfinished payouts", (db: Database) => hasUnfinishedPayouts(db)],
    [
      "the x402 watcher's settlements to verify (every second)",
      (db: Database) => readSettlementsToWatch(db, 1_000_000n),
    ],
    [
      "the x402 watcher's unknown outcomes (every second)",
      (db: Database) => readUnknownSettlements(db),
    ],
    ["health: the mail outbox", (db: Database) => readOutboxStatus(db)],
    ["the confirmer's unfinished payouts, read", (db: Database) => readUnfinishedPayouts(db)],
    ["health: the payout backlog", (db: Database) => readPayoutBacklog(db)],
  ])("%s: no growing table read whole", async (_name, run) => {
    expect(await wholeReadsOf(run)).toEqual([]);
  });

  it("health's amount space fill reads only held reservations", async () => {
    expect(await wholeReadsOf((db) => readAmountSpaceFill(db, 999_999))).toEqual([]);
  });

  it("finds a whole read where there is one (the check itself can fail)", async () => {
    expect(
      await wholeReadsOf(
        (db) => db`select status, count(*) from app.mail_messages group by status`,
      ),
    ).toEqual(["mail_messages"]);
    expect(
      await wholeReadsOf(
        (db) => db`select count(*) filter (where status = 'paid') from app.payouts`,
      ),
    ).toEqual(["payouts"]);
  });
});

describe("the metrics scrape (GET /metrics, every READ_CACHE_MS on every replica)", () => {
  // The kept counts (migration 0032), as the row-counts worker leaves them after its first tick;
  // before it, the scrape counts afresh (docs/operating.md#the-scrapes-counts-migration-0032).
  beforeAll(async () => {
    await countRows(connection.sql);
  });

  it.each([
    ["claims by status and payouts by event", (db: Database) => readStatusCounts(db)],
    ["mails by event and inbound messages by status", (db: Database) => readMailCounts(db)],
  ])("%s: no growing table read whole", async (_name, run) => {
    expect(await wholeReadsOf(run)).toEqual([]);
  });
});

describe("the ledger's pages past the first (read on every request)", () => {
  // With its limit sent as a parameter, PostgreSQL planned a deep page afresh on every request:
  // the generic plan, not knowing how few rows are wanted, cost more than any custom one. On a
  // year that planning took twice the read (api/db/limitLiteral.ts).
  it.each([
    ["by cursor", {}],
    ["for one agent", { agentName: "agent-1" }],
    ["in a time window", { since: new Date("2026-01-01"), until: new Date("2026-02-01") }],
  ])("%s: keeps one plan once it has run a few times", async (_name, filter) => {
    const after = {
      completedAt: "2026-01-15T00:00:00.000000Z",
      claimId: "clm_AAAAAAAAAAAAAAAAAAAAAA",
    };
    const statements = await connection.capture(async (db) => {
      for (let run = 0; run < 8; run += 1) {
        await listLedgerEntries(db, { limit: 20, after, ...filter });
      }
    });
    expect(statements.at(-1)?.query).toMatch(/\blimit 21\s*$/);
    const [plans] = await connection.sql<{ generic_plans: string; custom_plans: string }[]>`
      select generic_plans::text, custom_plans::text from pg_prepared_statements
      where statement = ${statements.at(-1)?.query ?? ""}`;
    expect(Number(plans?.generic_plans)).toBeGreaterThan(0);
  });
});
