import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { BatchedRateCounter } from "../../api/rateLimits/batchedCounter.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The batched rate counter against a real PostgreSQL: a request that arrives while the batch
 * before it is on its way is counted with that batch's requests. Before, it was counted without
 * them, and a client went over its limit by a batch (hardening.test's fourth write of three
 * answered 201 on a busy CI machine).
 */

let database: TestDatabase;
let sql: Database;
let holder: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 2 });
  holder = connectDatabase(database.url, { max: 1 });
});

afterAll(async () => {
  await sql?.end();
  await holder?.end();
  await database?.drop();
});

/** Whether a statement of the counter is waiting for a row lock. */
async function counterWaitsForLock(): Promise<boolean> {
  const [row] = await holder<{ waiting: number }[]>`
    select count(*)::int as waiting from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock'
      and query like '%app.rate_limits%'`;
  return (row?.waiting ?? 0) > 0;
}

/** Locks a client's row in a transaction of its own; the returned function ends it. */
async function holdRow(key: string): Promise<() => void> {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  await new Promise<void>((resolveLocked, rejectLocked) => {
    sql
      .begin(async (transaction) => {
        await transaction`select 1 from app.rate_limits where key = ${key} for update`;
        resolveLocked();
        await released;
      })
      .catch(rejectLocked);
  });
  return release;
}

describe("the batched rate counter", () => {
  it("counts a request that arrives while the batch before it is on its way with that batch", async () => {
    const counter = new BatchedRateCounter(sql, 3600, 20);
    const key = "write:198.51.100.7";
    expect((await counter.count(key)).count).toBe(1);

    // Hold the client's row: the next batch waits in PostgreSQL until released.
    const release = await holdRow(key);

    expect((await counter.count(key)).count).toBe(2);
    await waitFor(counterWaitsForLock, { what: "the batch waiting on the row", timeoutMs: 10_000 });
    const meanwhile = await counter.count(key);
    release();

    expect(meanwhile.count).toBe(3);
    expect((await counter.count(key)).count).toBe(4);
    await waitFor(
      async () => {
        const [row] = await holder<{ count: number }[]>`
          select count from app.rate_limits where key = ${key}`;
        return row?.count === 4;
      },
      { what: "all four requests in PostgreSQL", timeoutMs: 10_000 },
    );
  });

  it("keeps counting a batch that timed out, and adds it with a later one", async () => {
    const counter = new BatchedRateCounter(sql, 3600, 20);
    const key = "write:198.51.100.8";
    expect((await counter.count(key)).count).toBe(1);
    const release = await holdRow(key);
    let failed: () => void = () => {};
    const batchFailed = new Promise<void>((resolve) => {
      failed = resolve;
    });
    counter.onFlushError = () => failed();

    expect((await counter.count(key)).count).toBe(2);
    // The batch gives up after its 5 s; its request is pending again, not given back.
    await batchFailed;
    const afterFailure = await counter.count(key);
    release();

    expect(afterFailure.count).toBe(3);
    await waitFor(
      async () => {
        const [row] = await holder<{ count: number }[]>`
          select count from app.rate_limits where key = ${key}`;
        return (row?.count ?? 0) >= 3;
      },
      { what: "the requests in PostgreSQL", timeoutMs: 10_000 },
    );
  }, 20_000);
});
