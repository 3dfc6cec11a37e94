import { Router } from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { pageRoutes } from "../../api/pages/pageRoutes.ts";
import { devnetAccounts } from "../../scripts/devnet/accounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { freePort } from "../support/ports.ts";
import { testServiceConfig } from "../support/service.ts";
import { startTestApp } from "../support/testApp.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Found by the fault suite (RELIABILITY.md#what-the-suite-found): a request that reached the
 * database while it restarted was answered 500 `internal_error`, as if it were a bug. A session the
 * server ends (57P01, a restart or failover) or a server that cannot be reached is a 503
 * `temporarily_unavailable` with Retry-After, like a database timeout.
 */

let database: TestDatabase;
let observer: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  observer = connectDatabase(database.url, { max: 1 });
});

afterAll(async () => {
  await observer?.end({ timeout: 1 });
  await database?.drop();
});

/**
 * An app whose route runs `query` on `pool`, mounted before the pages as the API's routers are
 * (the pages have an error handler of their own).
 */
function appQuerying(pool: Database, query: (pool: Database) => Promise<unknown>) {
  const router = Router();
  router.get("/test-only/query", async (_request, response) => {
    await query(pool);
    response.json({ done: true });
  });
  const config = testServiceConfig(
    { rpcUrl: "http://127.0.0.1:9", accounts: devnetAccounts() },
    database.url,
  );
  return startTestApp({
    sql: observer,
    config,
    routers: (context) => [router, pageRoutes(context)],
  });
}

async function expectTemporarilyUnavailable(response: Response) {
  expect(response.status).toBe(503);
  expect(response.headers.get("retry-after")).toBe("5");
  expect(await response.json()).toMatchObject({ type: "/problems/temporarily_unavailable" });
}

describe("a database that goes away under a request", () => {
  it("a session ended by the server (a restart, a failover) is a 503, not a 500", async () => {
    const pool = connectDatabase(database.url, { max: 1 });
    const app = await appQuerying(pool, (sql) => sql`select pg_sleep(10) as fault_suite_probe`);
    try {
      const answer = fetch(`${app.url}/test-only/query`);
      const [running] = await waitFor(async () => {
        const rows = await observer<{ pid: number }[]>`
          select pid from pg_stat_activity
          where query like '%fault_suite_probe%' and pid <> pg_backend_pid()`;
        return rows.length > 0 ? rows : undefined;
      });
      await observer`select pg_terminate_backend(${running?.pid ?? 0})`;
      await expectTemporarilyUnavailable(await answer);
    } finally {
      await app.stop();
      await pool.end({ timeout: 1 });
    }
  });

  it("a server that cannot be reached is a 503, not a 500", async () => {
    const nowhere = new URL(database.url);
    nowhere.port = String(await freePort());
    const pool = connectDatabase(nowhere.toString(), { max: 1 });
    const app = await appQuerying(pool, (sql) => sql`select 1`);
    try {
      // The surfaces are entered only for their own paths (dispatchToSurfaces): the error must
      // still reach the app's handler, not the pages' (mounted after it), even for `*/*`.
      const answer = await fetch(`${app.url}/test-only/query`, { headers: { accept: "*/*" } });
      expect(answer.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      await expectTemporarilyUnavailable(answer);
    } finally {
      await app.stop();
      await pool.end({ timeout: 1 });
    }
  });
});
