import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { cachedFirstPages } from "../../api/ledger/cachedFirstPages.ts";
import { listLedger } from "../../api/ledger/listLedger.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

/**
 * The ledger's unfiltered first page is read once per page size and shared until a claim
 * completes (`forget`, on the completion NOTIFY); filtered and later pages are read each time.
 * Reads are counted at the pool, as the ledger's join is sent.
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

function countingLedgerReads(pool: Database) {
  const counts = { reads: 0 };
  const counting = new Proxy(pool, {
    apply(target, self, args: unknown[]) {
      const strings = args[0] as TemplateStringsArray | undefined;
      if (Array.isArray(strings) && strings.join("?").includes("completed_at_exact")) {
        counts.reads += 1;
      }
      return Reflect.apply(target, self, args);
    },
  });
  return { sql: counting, counts };
}

describe("the ledger's first page", () => {
  it("is read once per page size until a claim completes", async () => {
    const { sql: counted, counts } = countingLedgerReads(sql);
    const pages = cachedFirstPages(counted, 60_000);
    for (let index = 0; index < 20; index++) {
      const result = await listLedger(counted, {}, pages);
      expect(result.type).toBe("page");
    }
    expect(counts.reads).toBe(1);
    await listLedger(counted, { limit: "5" }, pages);
    await listLedger(counted, { limit: "5" }, pages);
    expect(counts.reads).toBe(2);

    pages.forget();
    await listLedger(counted, {}, pages);
    await listLedger(counted, { limit: "5" }, pages);
    expect(counts.reads).toBe(4);
  });

  it("is not what a filtered or later page reads", async () => {
    const { sql: counted, counts } = countingLedgerReads(sql);
    const pages = cachedFirstPages(counted, 60_000);
    for (const query of [
      { agent_name: "someone" },
      { agent_name: "someone" },
      { since: "2026-01-01T00:00:00Z" },
      { until: "2026-01-01T00:00:00Z" },
    ]) {
      expect((await listLedger(counted, query, pages)).type).toBe("page");
    }
    expect(counts.reads).toBe(4);
  });

  it("refuses a bad query before any cache", async () => {
    const pages = cachedFirstPages(sql, 60_000);
    expect((await listLedger(sql, { limit: "0" }, pages)).type).toBe("invalid_request");
  });
});
