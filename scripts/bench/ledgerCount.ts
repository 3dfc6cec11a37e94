import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { checkLedgerFigures } from "../../api/ledger/checkLedgerFigures.ts";
import { databaseUrl } from "../../test/support/database.ts";
import { freePort } from "../../test/support/ports.ts";
import { startEmbeddedPostgres } from "../devnet/embeddedPostgres.ts";
import { machineState, writeBenchResult } from "./benchResult.ts";
import { countLedgerFigures, forgetLedgerFigures } from "./yearOfTraffic.ts";

/**
 * `npm run bench:ledger-count` (docs/operating.md#migrations-at-size): how long migration 0027's
 * count of the ledger's figures takes on a year's claims, and how long it makes writes wait.
 * An embedded PostgreSQL of its own; the claims, payments and payouts of a year (what the count
 * reads; the other tables do not matter to it) written set-based with triggers off, shaped as
 * bench:scale writes them: nine claims in ten expired unpaid, one completed with its payment and
 * confirmed payout, a payout address for three claims, ids in random order. Then:
 * 1. the count alone;
 * 2. the writes below for BENCH_PROBE_SECONDS (5) with the figures kept: the baseline;
 * 3. the figures forgotten and counted again while the same writes run, one connection each, as
 *    the pools run them (lock_timeout 5 s): a payout taken back by a reorg and mined again, a
 *    completion undone and done again (both on completed claims, before and past the cursor),
 *    and a payment recorded for an expired claim (rolled back), the matcher's write;
 * 4. the kept figures against a fresh count (api/ledger/checkLedgerFigures.ts).
 * BENCH_SCALE (0.1: a million claims) sizes the year.
 */

/** Thrown to roll a write back. */
class RolledBack extends Error {}

const SCALE = Number(process.env.BENCH_SCALE ?? 0.1);
const PROBE_SECONDS = Number(process.env.BENCH_PROBE_SECONDS ?? 5);
const log = (line: string) => console.error(line);

const directory = await mkdtemp(join(tmpdir(), "ledger-count-pg-"));
await chmod(directory, 0o755);
const server = await startEmbeddedPostgres({
  dataDirectory: join(directory, "data"),
  port: await freePort(),
  durable: false,
});
const admin = postgres(server.url(), { max: 1, onnotice: () => {} });
const url = databaseUrl(server.url(), "ledger_count");
const connections: Database[] = [];
const connect = (name: string) => {
  const connection = connectDatabase(url, { max: 1, name, lockTimeoutMs: 5_000 });
  connections.push(connection);
  return connection;
};
try {
  await admin.unsafe("create database ledger_count");
  const sql = connectDatabase(url, { max: 1, name: "ledger count bench" });
  connections.push(sql);
  await migrate(sql);
  const claims = Math.round(10_000_000 * SCALE);
  log(`writing ${claims} claims, ${claims / 10} completed…`);
  let at = performance.now();
  await fillClaims(sql, claims);
  log(`  ${((performance.now() - at) / 1000).toFixed(1)} s`);

  await forgetLedgerFigures(sql);
  log("the count alone:");
  at = performance.now();
  const alone = await countLedgerFigures(sql, log);
  const aloneSeconds = (performance.now() - at) / 1000;
  log(`  ${aloneSeconds.toFixed(1)} s`);

  const completed = (
    await sql<{ id: string }[]>`
      select id from app.claims where status = 'completed' order by random() limit 2000`
  ).map((row) => row.id);
  const expired = (
    await sql<{ id: string }[]>`
      select id from app.claims where status = 'expired'
      order by random() limit 2000`
  ).map((row) => row.id);
  const writers = [
    { name: "payout reorged and mined again", write: reorgPayout(connect("reorg"), completed) },
    { name: "completion undone and done again", write: undoCompletion(connect("undo"), completed) },
    { name: "payment recorded (matcher)", write: recordPayment(connect("matcher"), expired) },
  ];

  log(`baseline: the writes for ${PROBE_SECONDS} s, figures kept…`);
  let until = performance.now() + PROBE_SECONDS * 1000;
  const baseline = await Promise.all(writers.map(({ write }) => timeWrites(write, () => until)));

  await forgetLedgerFigures(sql);
  log("the count while the writes run:");
  let counting = true;
  at = performance.now();
  until = Number.POSITIVE_INFINITY;
  const during = Promise.all(
    writers.map(({ write }) => timeWrites(write, () => (counting ? until : 0))),
  );
  const busy = await countLedgerFigures(sql, log);
  const busySeconds = (performance.now() - at) / 1000;
  counting = false;
  const whileCounting = await during;
  log(`  ${busySeconds.toFixed(1)} s`);

  const check = await checkLedgerFigures(sql);
  const rows = writers.map(({ name }, index) => ({
    write: name,
    baseline: summary(baseline[index] ?? []),
    whileCounting: summary(whileCounting[index] ?? []),
  }));
  console.log(`\nBENCH_SCALE ${SCALE}: ${claims} claims, ${claims / 10} completed payouts\n`);
  console.log(
    `| count | ${aloneSeconds.toFixed(1)} s alone (${alone.batches} batches, longest ${alone.longestBatchMs.toFixed(0)} ms) | ${busySeconds.toFixed(1)} s with writes (${busy.batches} batches, longest ${busy.longestBatchMs.toFixed(0)} ms, gave way ${busy.retries} times) |`,
  );
  console.log("\n| write | baseline: n, p50 / p99 / max ms, failed | while counting |");
  console.log("|---|---|---|");
  for (const row of rows) {
    console.log(`| ${row.write} | ${format(row.baseline)} | ${format(row.whileCounting)} |`);
  }
  console.log(
    `\nkept figures against a fresh count: ${check.drifted.length} days and ${check.driftedPayees} payout addresses differ`,
  );
  console.log(JSON.stringify(machineState()));
  await writeBenchResult({
    scale: SCALE,
    claims,
    aloneSeconds,
    alone,
    busySeconds,
    busy,
    rows,
    check,
  });
  if (!check.kept || check.drifted.length > 0 || check.driftedPayees > 0) process.exitCode = 1;
} finally {
  await Promise.all(connections.map((connection) => connection.end()));
  await admin.end();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
}

/** The year's claims, payments and payouts, triggers and foreign keys off (as bench:scale). */
async function fillClaims(sql: Database, n: number): Promise<void> {
  await sql.begin(async (transaction) => {
    await transaction.unsafe("set local session_replication_role = replica");
    await transaction.unsafe(`
      insert into app.claims (id, flow, payout_address, amount_due, status, created_at,
        expires_at, paid_at, completed_at)
      select 'clm_' || translate(encode(decode(md5('claim' || i), 'hex'), 'base64'), '+/=', '-_'),
        'claim',
        '0x' || substr(md5('payout' || (i % (${n} / 3))), 1, 32)
          || substr(md5('payout2' || (i % (${n} / 3))), 1, 8),
        10000000 + 1 + (i::int8 * 7919) % 999999,
        case when i % 10 = 0 then 'completed' else 'expired' end,
        created, created + interval '7 days',
        case when i % 10 = 0 then created + interval '2 minutes' end,
        case when i % 10 = 0 then created + interval '2 minutes 10 seconds' end
      from generate_series(1, ${n}) i,
        lateral (select now() - interval '372 days' * (1 - i::float8 / ${n}) as created) t`);
    await transaction.unsafe(`
      insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
        from_address, value, matched_by)
      select '0x' || md5('pay' || i) || md5('pay2' || i), 0,
        'clm_' || translate(encode(decode(md5('claim' || i), 'hex'), 'base64'), '+/=', '-_'),
        i, '0x' || md5('block' || i) || md5('block2' || i),
        '0x' || substr(md5('payer' || i), 1, 32) || substr(md5('payer2' || i), 1, 8),
        10000000 + 1 + (i::int8 * 7919) % 999999, 'amount'
      from generate_series(10, ${n}, 10) i`);
    await transaction.unsafe(`
      insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status,
        confirmed_at)
      select 'clm_' || translate(encode(decode(md5('claim' || i), 'hex'), 'base64'), '+/=', '-_'),
        '0x' || substr(md5('payout' || (i % (${n} / 3))), 1, 32)
          || substr(md5('payout2' || (i % (${n} / 3))), 1, 8),
        1000000, i, '0x' || md5('po' || i) || md5('po2' || i), '0x00', 'confirmed', now()
      from generate_series(10, ${n}, 10) i`);
  });
  for (const table of ["claims", "payments", "payouts"]) {
    await sql.unsafe(`vacuum (analyze) app.${table}`);
  }
}

type Write = () => Promise<void>;

function pick(ids: string[]): string {
  return ids[Math.floor(Math.random() * ids.length)] ?? "";
}

/** The confirmer after a reorg: the payout back to broadcast, then mined again. */
function reorgPayout(sql: Database, completed: string[]): Write {
  return async () => {
    const claim = pick(completed);
    await sql.begin(async (transaction) => {
      await transaction`update app.payouts set status = 'broadcast' where claim_id = ${claim}`;
      await transaction`update app.payouts set status = 'confirmed' where claim_id = ${claim}`;
    });
  };
}

/** A completion undone (the payout's reorg) and done again, at the same time. */
function undoCompletion(sql: Database, completed: string[]): Write {
  return async () => {
    const claim = pick(completed);
    await sql.begin(async (transaction) => {
      const [row] = await transaction<{ completed_at: Date }[]>`
        update app.claims c set status = 'paying', completed_at = null
        from app.claims was where was.id = c.id and c.id = ${claim}
        returning was.completed_at`;
      await transaction`update app.claims set status = 'completed',
        completed_at = ${row?.completed_at ?? new Date()} where id = ${claim}`;
    });
  };
}

/** The matcher's write: a payment for a claim, rolled back so the claim stays as it was. */
function recordPayment(sql: Database, expired: string[]): Write {
  let nonce = 0;
  return async () => {
    const claim = pick(expired);
    nonce += 1;
    const hash = `0x${nonce.toString(16).padStart(64, "a")}`;
    await sql
      .begin(async (transaction) => {
        await transaction`insert into app.payments (tx_hash, log_index, claim_id, block_number,
            block_hash, from_address, value, matched_by)
          values (${hash}, 0, ${claim}, 1, ${hash}, ${"0x".padEnd(42, "b")}, 10000001, 'amount')`;
        throw new RolledBack();
      })
      .catch((error: unknown) => {
        if (!(error instanceof RolledBack)) throw error;
      });
  };
}

/** Each write's milliseconds, back to back until `until()`; a failed write counts as NaN. */
async function timeWrites(write: Write, until: () => number): Promise<number[]> {
  const times: number[] = [];
  while (performance.now() < until()) {
    const at = performance.now();
    try {
      await write();
      times.push(performance.now() - at);
    } catch (error) {
      log(`  a write failed: ${(error as Error).message}`);
      times.push(Number.NaN);
    }
  }
  return times;
}

function summary(times: number[]) {
  const done = times.filter((time) => !Number.isNaN(time)).sort((a, b) => a - b);
  const at = (share: number) => done[Math.min(done.length - 1, Math.floor(done.length * share))];
  return {
    writes: done.length,
    failed: times.length - done.length,
    p50: at(0.5) ?? 0,
    p99: at(0.99) ?? 0,
    max: done.at(-1) ?? 0,
  };
}

function format(figures: ReturnType<typeof summary>): string {
  return `${figures.writes}, ${figures.p50.toFixed(1)} / ${figures.p99.toFixed(1)} / ${figures.max.toFixed(1)}, ${figures.failed}`;
}
