import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { createLogger } from "../../api/logger.ts";
import { runWorker, type Worker } from "../../api/workers/runWorker.ts";
import { WAKE_CHANNELS } from "../../api/workers/wakeChannels.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * A worker loop's wake-ups by NOTIFY on a real database. The matcher's channel fires with every
 * block the indexer commits, whatever the matcher is doing: a wake-up ends an ordinary pause, but
 * not a failing worker's backoff (with its RPC down, the matcher would otherwise try again with
 * every block).
 */

let database: TestDatabase;
let sql: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 2 });
});

afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await database?.drop();
});

/** Runs `worker` on the test database, its channel fired every 25 ms meanwhile. */
async function whileChannelFires<T>(worker: Worker, body: () => Promise<T>): Promise<T> {
  const loop = runWorker(
    {
      lockSession: (onClose) => connectDatabase(database.url, { max: 1, session: { onClose } }),
      notifications: sql,
    },
    worker,
    createLogger("silent"),
  );
  const firing = setInterval(() => {
    sql`select pg_notify(${WAKE_CHANNELS.indexerProgress}, '')`.catch(() => {});
  }, 25);
  try {
    return await body();
  } finally {
    clearInterval(firing);
    await loop.stop();
  }
}

describe("a worker's wake-ups by channel", () => {
  it("end an idle worker's pause at once", async () => {
    let ticks = 0;
    await whileChannelFires(
      {
        name: "idle",
        lockKey: 990_001,
        intervalMs: 600_000,
        wakeChannels: [WAKE_CHANNELS.indexerProgress],
        tick: async () => {
          ticks += 1;
          return false;
        },
      },
      () => waitFor(() => ticks >= 3, { what: "three ticks, woken", timeoutMs: 10_000 }),
    );
    expect(ticks).toBeGreaterThanOrEqual(3);
  });

  it("do not cut a failing worker's backoff short", async () => {
    const ticks: number[] = [];
    await whileChannelFires(
      {
        name: "failing",
        lockKey: 990_002,
        intervalMs: 100,
        wakeChannels: [WAKE_CHANNELS.indexerProgress],
        tick: async () => {
          ticks.push(performance.now());
          throw new Error("the RPC is down");
        },
      },
      () => waitFor(() => ticks.length >= 3, { what: "three failed ticks", timeoutMs: 10_000 }),
    );
    // Backoff after one failure and after two: 500 ms, then 1,000. Woken by every notification,
    // the three ticks came within a tenth of that.
    const [first, , third] = ticks as [number, number, number];
    expect(third - first).toBeGreaterThanOrEqual(1_400);
  });
});
