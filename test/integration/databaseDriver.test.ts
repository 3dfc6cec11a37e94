import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

/**
 * The database driver (postgres.js 3.4.9, patched: patches/, docs/traps.md#postgresjs) when the
 * server closes a connection under a transaction. The long fault run lost a replica this way
 * while PostgreSQL restarted: a query a transaction's code issued after its connection had
 * closed was written from a timer onto no socket, and the TypeError took the process down, out
 * of reach of any `catch`. Run in a process of its own, so that such a crash is this test's
 * failure and not the test runner's.
 */

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

/**
 * A transaction whose connection the server ends; once the driver has seen it close, the pool
 * (one connection) serves another query on a new session, and only then does the transaction's
 * code issue more queries. Prints what each did.
 */
const TRANSACTION_AFTER_CLOSE = `
import { connectDatabase } from "./api/db/connect.ts";
process.on("uncaughtException", (error) => {
  console.log(JSON.stringify({ uncaught: error.message }));
  process.exit(3);
});
const sql = connectDatabase(process.env.DATABASE_URL, { max: 1 });
const killer = connectDatabase(process.env.DATABASE_URL, { max: 1 });
const seen = [];
const outcome = (query) => query.then(() => "ok", (error) => error.code ?? error.message);
let reopenedSeen;
const reopened = new Promise((resolve) => (reopenedSeen = resolve));
const begun = sql.begin(async (tx) => {
  const [{ pid }] = await tx\`select pg_backend_pid() as pid\`;
  await killer\`select pg_terminate_backend(\${pid})\`;
  await reopened;
  seen.push(await outcome(tx\`select 1\`));
  seen.push(await outcome(tx\`select \${"a parameter"}::text\`));
  seen.push(await outcome(tx\`update app.claims set status = status\`));
});
const transaction = await outcome(begun);
const after = await outcome(sql\`select 1\`);
reopenedSeen();
while (seen.length < 3) await new Promise((resolve) => setImmediate(resolve));
const afterAgain = await outcome(sql\`select 1\`);
await sql.end({ timeout: 1 });
await killer.end({ timeout: 1 });
console.log(JSON.stringify({ transaction, seen, after, afterAgain }));
`;

describe("the database driver, when the server closes a transaction's connection", () => {
  it("refuses the transaction's later queries and goes on, never throwing out of a timer", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--input-type=module", "-e", TRANSACTION_AFTER_CLOSE],
      { env: { ...process.env, DATABASE_URL: database.url }, timeout: 30_000 },
    ).catch((error: { stdout?: string; code?: number }) => ({ stdout: error.stdout ?? "" }));
    const lines = stdout.trim().split("\n");
    const result = JSON.parse(lines.at(-1) ?? "{}");
    expect(result).toEqual({
      transaction: "CONNECTION_CLOSED",
      // Refused, never run on the pool's new session outside the transaction.
      seen: ["CONNECTION_CLOSED", "CONNECTION_CLOSED", "CONNECTION_CLOSED"],
      // The pool's one connection serves other queries on a new session, before and after.
      after: "ok",
      afterAgain: "ok",
    });
  });
});
