import { loadavg } from "node:os";
import postgres from "postgres";
import type { IncomingTransfer } from "../../api/chain/incomingTransfers.ts";
import type { Database, Sql } from "../../api/db/connect.ts";
import { encodeLedgerCursor, type LedgerCursor } from "../../api/schemas/ledgerCursor.ts";
import { freePort } from "../../test/support/ports.ts";
import { startBenchProcess } from "./benchProcess.ts";
import { writeBenchResult } from "./benchResult.ts";
import { startBenchInfrastructure } from "./benchStack.ts";
import { type BenchRoute, benchRoutes, HTTP_BENCH_SERVICE_ENV, seedLedger } from "./httpRoutes.ts";
import { runLoad, unexpectedStatuses } from "./loadRounds.ts";
import { GROWING } from "./queryPlans.ts";
import { type ProbeResult, runProbes } from "./scaleQueries.ts";
import { passYearAttention } from "./yearAttention.ts";
import { compareWithRealRows, fillYear, indexerSchema } from "./yearOfTraffic.ts";

/**
 * `npm run bench:scale` (method and figures: BENCHMARKS.md#a-year-of-traffic). One devnet
 * (Anvil, embedded PostgreSQL, Ponder), the service as `node api/main.ts`, and in one run:
 * 1. the empty database (the 25 x402 payouts of bench:http's seeding): every route, then the hot
 *    reads called directly (scaleQueries.ts);
 * 2. the service stopped, a year of traffic written into the same database (yearOfTraffic.ts),
 *    the service started again (how long until it answers), the same routes and reads;
 * 3. each figure against its empty one (target: within 1.25×), the read routes against bare
 *    Express (target: at least 50%), every plan that scans a growing table, and the disk.
 * BENCH_SCALE (default 1: 10 million claims) shrinks the year; BENCH_LOAD_SECONDS (3) is each
 * route's run; BENCH_ROUTES=<part>,… measures only some routes.
 */

const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 3);
const CONNECTIONS = 50;
const RATIO_TARGET = 1.25;
const IDLE_SECONDS = 20;

const infrastructure = await startBenchInfrastructure({ serviceEnv: HTTP_BENCH_SERVICE_ENV });
const admin = postgres(infrastructure.databaseUrl, {
  max: 2,
  onnotice: () => {},
  types: { bigint: postgres.BigInt },
}) as unknown as Database;
const stops: (() => Promise<void>)[] = [];
const log = (line: string) => console.error(line);
try {
  const port = await freePort();
  const startService = () =>
    startBenchProcess({
      script: "api/main.ts",
      env: { ...infrastructure.env, PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` },
      readyPath: "/api/health",
      port,
    });
  let startedAt = performance.now();
  let service = await startService();
  const emptyStartSeconds = (performance.now() - startedAt) / 1000;
  const bare = await startBenchProcess({ script: "scripts/bench/bareServer.ts", env: {} });
  stops.push(bare.stop);

  log("seeding 25 x402 payouts…");
  const claimIds = await seedLedger(infrastructure, service.url, 25);
  const paymentTx = await realPaymentTx(admin, claimIds);

  log("empty database:");
  const empty = await measure(service.url, bare.url, claimIds, paymentTx);
  await service.stop();

  log(`writing a year of traffic (BENCH_SCALE ${SCALE})…`);
  const blocks = await blocksBelowCursor(admin, infrastructure.client);
  const fill = await fillYear(admin, { scale: SCALE, blocks, log });
  log(`  ${fill.seconds.toFixed(0)} s in all`);
  const widths = await compareWithRealRows(admin, claimIds);
  // CONFIRMATIONS as the service runs here (its default) and as the probes read health.
  const attention = await passYearAttention(admin, infrastructure.client, {
    chainId: 8453,
    confirmations: 3,
    log,
  });

  startedAt = performance.now();
  service = await startService();
  const startSeconds = (performance.now() - startedAt) / 1000;
  stops.push(() => service.stop());
  log(
    `service answers ${startSeconds.toFixed(1)} s after start on the year's database (${emptyStartSeconds.toFixed(1)} s on the empty one, before its migrations)`,
  );

  // What the running service reads whole while nothing is asked of it: its workers' and
  // timers' statements, which no probe lists (two read a growing table every second).
  const idle = await wholeTableScansWhileIdle(admin, IDLE_SECONDS);
  log(
    `idle for ${IDLE_SECONDS} s on the year: ${idle.length === 0 ? "no growing table read whole" : idle.map((scan) => `${scan.table} read whole ${scan.scans} times (${scan.rows} rows)`).join(", ")}`,
  );

  log("the year's database:");
  const year = await measure(service.url, bare.url, claimIds, paymentTx);
  const disk = await diskFigures(admin, fill.shape.claims, fill.shape.completed);

  const summary = {
    scale: SCALE,
    shape: fill.shape,
    fillSeconds: fill.seconds,
    fillSteps: fill.steps,
    attention,
    startSeconds,
    emptyStartSeconds,
    widths,
    disk,
    idleScans: idle,
    routes: empty.routes.map((route) => {
      const big = year.routes.find((other) => other.name === route.name);
      return {
        ...route,
        yearRps: big?.rps,
        yearShare: big?.share,
        yearP99: big?.p99,
        yearErrors: big?.errors,
      };
    }),
    probes: empty.probes.map((probe) => {
      const big = year.probes.find((other) => other.name === probe.name);
      return { ...probe, yearMs: big?.medianMs, yearScans: big?.scans ?? [] };
    }),
    loadAverage: loadavg(),
  };
  console.log(report(summary));
  await writeBenchResult(summary);
  const failures = [
    ...idle.map((scan) => `the idle service: scans ${scan.table} (${scan.scans} times)`),
    ...summary.probes
      .filter((probe) => probe.yearScans.length > 0)
      .map((probe) => `${probe.name}: scans ${probe.yearScans.join(", ")}`),
  ];
  if (failures.length > 0) {
    console.error(
      `Plans that scan a growing table on the year's database:\n  ${failures.join("\n  ")}`,
    );
    process.exitCode = 1;
  }
} finally {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await admin.end();
  await infrastructure.stop();
}

interface RouteFigures {
  name: string;
  rps: number;
  bareRps: number;
  share: number;
  p50: number;
  p99: number;
  errors: number;
  read: boolean;
}

/** Every route once at saturation beside a bare Express run, then the direct reads. */
async function measure(serviceUrl: string, bareUrl: string, claimIds: string[], paymentTx: string) {
  const cursor = await deepCursor(admin);
  const routes = [...benchRoutes(claimIds), ...scaleRoutes(paymentTx, encodeLedgerCursor(cursor))];
  const only = process.env.BENCH_ROUTES?.split(",");
  const results: RouteFigures[] = [];
  for (const route of routes.filter((r) => !only || only.some((part) => r.name.includes(part)))) {
    const spec = {
      method: route.method,
      body: route.body,
      varyPayoutAddress: route.varyPayoutAddress,
      paths: route.paths,
      connections: CONNECTIONS,
    };
    await runLoad({ url: `${serviceUrl}${route.path}`, ...spec, durationSeconds: 1 });
    const bareRun = await runLoad({
      url: `${bareUrl}/bare`,
      method: route.method,
      body:
        route.method === "POST"
          ? { payout_address: "0x000000000000000000000000000000000000dEaD" }
          : undefined,
      connections: CONNECTIONS,
      durationSeconds: SECONDS,
    });
    const run = await runLoad({
      url: `${serviceUrl}${route.path}`,
      ...spec,
      durationSeconds: SECONDS,
    });
    results.push({
      name: route.name,
      rps: run.rps,
      bareRps: bareRun.rps,
      share: run.rps / bareRun.rps,
      p50: run.p50,
      p99: run.p99,
      errors: run.errors + unexpectedStatuses(run, route.expected),
      read: route.method === "GET" || route.name.includes("graphql"),
    });
    log(
      `  ${route.name}: ${run.rps.toFixed(0)} req/s (${((run.rps / bareRun.rps) * 100).toFixed(0)}% of bare), p99 ${run.p99} ms`,
    );
  }
  const head = await infrastructure.client.getBlockNumber({ cacheTime: 0 });
  const probes = await runProbes(infrastructure.databaseUrl, {
    chainId: 8453,
    deepCursor: cursor,
    blockOfTransfers: busyBlock(head + 1n),
    confirmedThrough: head - 3n,
  });
  for (const probe of probes) {
    log(
      `  ${probe.name}: ${probe.medianMs.toFixed(2)} ms${probe.scans.length ? ` (scans ${probe.scans.join(", ")})` : ""}`,
    );
  }
  return { routes: results, probes };
}

/** The routes bench:http does not load: health, the explainer, deep ledger pages, the stats. */
function scaleRoutes(paymentTx: string, cursor: string): BenchRoute[] {
  const deepQuery = `{ ledger(first: 20, after: "${cursor}") { edges { node { claimId payoutTx completedAt } } pageInfo { hasNextPage endCursor } } }`;
  return [
    { name: "GET /api/health", method: "GET", path: "/api/health", expected: 200, target: 0.5 },
    {
      name: "GET /api/payments/{tx}",
      method: "GET",
      path: `/api/payments/${paymentTx}`,
      expected: 200,
      target: 0.5,
    },
    {
      name: "GET /api/ledger (deep)",
      method: "GET",
      path: `/api/ledger?cursor=${cursor}`,
      expected: 200,
      target: 0.5,
    },
    {
      name: "GET /ledger (HTML, deep)",
      method: "GET",
      path: `/ledger?cursor=${cursor}`,
      expected: 200,
      target: 0.5,
    },
    {
      name: "POST /graphql (deep)",
      method: "POST",
      path: "/graphql",
      body: { query: deepQuery },
      expected: 200,
      target: 0.5,
    },
    {
      name: "POST /graphql (stats)",
      method: "POST",
      path: "/graphql",
      body: { query: "{ stats { completedPayouts usdcPaidOut uniquePayoutAddresses } }" },
      expected: 200,
      target: 0.5,
    },
  ];
}

/** The ledger entry 100,000 deep (or the oldest one when there are fewer), as a cursor. */
async function deepCursor(sql: Sql): Promise<LedgerCursor> {
  const [row] = await sql<{ id: string; at: string }[]>`
    select id, to_char(completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at
    from (select id, completed_at from app.claims where status = 'completed'
      order by completed_at desc, id collate "C" desc limit 100000) newest
    order by completed_at, id collate "C" limit 1`;
  if (!row) throw new Error("no completed claim");
  return { completedAt: row.at, claimId: row.id };
}

async function realPaymentTx(sql: Sql, claimIds: string[]): Promise<string> {
  const [row] = await sql<{ tx_hash: string }[]>`
    select tx_hash from app.payments where claim_id = ${claimIds[0] ?? ""}`;
  if (!row) throw new Error("the seeded claim has no payment");
  return row.tx_hash;
}

/** The devnet's blocks below the matcher's cursor, with their hashes: where the year's transfers go. */
async function blocksBelowCursor(sql: Sql, client: typeof infrastructure.client) {
  const [cursor] = await sql<
    { block_number: bigint }[]
  >`select block_number from app.matcher_cursor`;
  const below = cursor ? cursor.block_number : 0n;
  if (below < 2n) throw new Error(`the matcher's cursor is at block ${below}: no blocks below it`);
  const blocks: { number: bigint; hash: string }[] = [];
  for (let number = 1n; number < below; number++) {
    const block = await client.getBlock({ blockNumber: number });
    blocks.push({ number, hash: block.hash });
  }
  return blocks;
}

/** 1,000 transfers of a busy block: unknown hashes, senders and amounts, as a new block brings. */
function busyBlock(blockNumber: bigint): IncomingTransfer[] {
  return Array.from({ length: 1000 }, (_, index) => {
    const hex = (seed: string, length: number) =>
      Buffer.from(`${seed}${index}`.padEnd(length / 2, "x"))
        .toString("hex")
        .slice(0, length);
    return {
      txHash: `0x${hex("busy-tx", 64)}`,
      logIndex: index,
      blockNumber,
      blockHash: `0x${hex("busy-block", 64)}`,
      blockTimestamp: BigInt(Math.floor(Date.now() / 1000)),
      from: `0x${hex("sender", 40)}`,
      value: 10_000_000n + BigInt(index * 997 + 1),
      authorizationNonce: null,
      transferOrdinal: 1,
    };
  });
}

/** The database's bytes: each table with its indexes and TOAST, and per claim and per payout. */
async function diskFigures(sql: Sql, claims: number, completed: number) {
  const schema = await indexerSchema(sql);
  const tables = await sql<{ table: string; rows: bigint; bytes: bigint; index_bytes: bigint }[]>`
    select format('%s.%s', n.nspname, c.relname) as table, c.reltuples::int8 as rows,
      pg_total_relation_size(c.oid)::int8 as bytes, pg_indexes_size(c.oid)::int8 as index_bytes
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind = 'r' and n.nspname in ('app', ${schema})
    order by pg_total_relation_size(c.oid) desc`;
  const [database] = await sql<
    { bytes: bigint }[]
  >`select pg_database_size(current_database())::int8 as bytes`;
  const bytesOf = (name: string) =>
    Number(tables.find((table) => table.table.endsWith(`.${name}`))?.bytes ?? 0n);
  const perClaim = bytesOf("claims") / claims;
  const perPayout =
    ([
      "payments",
      "payouts",
      "payout_attempts",
      "receipts",
      "incoming_transfer",
      "outgoing_transfer",
    ]
      .map(bytesOf)
      .reduce((sum, value) => sum + value, 0) +
      bytesOf("x402_payments") +
      bytesOf("outbox") * 0.5) /
    completed;
  return {
    tables: tables.map((table) => ({
      ...table,
      rows: Number(table.rows),
      bytes: Number(table.bytes),
      index_bytes: Number(table.index_bytes),
    })),
    databaseBytes: Number(database?.bytes ?? 0n),
    bytesPerClaim: perClaim,
    bytesPerCompletedPayout: perPayout,
  };
}

function report(summary: {
  scale: number;
  shape: { claims: number; completed: number; unmatched: number };
  fillSeconds: number;
  attention: { seconds: number; steps: number; longestMs: number };
  startSeconds: number;
  emptyStartSeconds: number;
  widths: { table: string; real: number | null; written: number | null }[];
  disk: Awaited<ReturnType<typeof diskFigures>>;
  routes: (RouteFigures & {
    yearRps?: number | undefined;
    yearShare?: number | undefined;
    yearP99?: number | undefined;
    yearErrors?: number | undefined;
  })[];
  probes: (ProbeResult & { yearMs?: number | undefined; yearScans: string[] })[];
  loadAverage: number[];
}): string {
  const pad = (text: string, width: number) => text.padEnd(width);
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  const lines = [
    "",
    `A year at scale ${summary.scale}: ${summary.shape.claims} claims, ${summary.shape.completed} completed, ${summary.shape.unmatched} unmatched; written in ${summary.fillSeconds.toFixed(0)} s; service answered ${summary.startSeconds.toFixed(1)} s after start (${summary.emptyStartSeconds.toFixed(1)} s on the empty database)`,
    `attention checked through the year in ${summary.attention.seconds.toFixed(1)} s (${summary.attention.steps} steps, the longest ${summary.attention.longestMs.toFixed(0)} ms)`,
    "",
    `${pad("route", 28)}${pad("empty req/s", 13)}${pad("year req/s", 12)}${pad("slowdown", 10)}${pad("year share", 12)}${pad("p99 e/y ms", 12)}errors`,
    ...summary.routes.map((route) => {
      const slowdown = route.yearRps ? route.rps / route.yearRps : Number.NaN;
      const flag =
        slowdown > RATIO_TARGET || (route.read && (route.yearShare ?? 0) < 0.5) ? " ✗" : "";
      return `${pad(route.name, 28)}${pad(route.rps.toFixed(0), 13)}${pad(route.yearRps?.toFixed(0) ?? "?", 12)}${pad(`${slowdown.toFixed(2)}×`, 10)}${pad(`${((route.yearShare ?? 0) * 100).toFixed(0)}%`, 12)}${pad(`${route.p99}/${route.yearP99}`, 12)}${route.errors}/${route.yearErrors}${flag}`;
    }),
    "",
    `${pad("read", 40)}${pad("empty ms", 10)}${pad("year ms", 10)}${pad("slowdown", 10)}scans on the year`,
    ...summary.probes.map((probe) => {
      const slowdown = (probe.yearMs ?? Number.NaN) / probe.medianMs;
      return `${pad(probe.name, 40)}${pad(probe.medianMs.toFixed(2), 10)}${pad(probe.yearMs?.toFixed(2) ?? "?", 10)}${pad(`${slowdown.toFixed(1)}×`, 10)}${probe.yearScans.join(", ") || "none"}`;
    }),
    "",
    "row widths (bytes): real rows / written rows",
    ...summary.widths.map((width) => `  ${pad(width.table, 20)}${width.real} / ${width.written}`),
    "",
    `disk: ${mib(summary.disk.databaseBytes)} in all; ${summary.disk.bytesPerClaim.toFixed(0)} B per claim (its table and indexes); ${summary.disk.bytesPerCompletedPayout.toFixed(0)} B per completed payout (payment, payout, attempt, receipt, x402 record, transfers, mail)`,
    ...summary.disk.tables
      .filter((table) => table.bytes > 1 << 20)
      .map(
        (table) =>
          `  ${pad(table.table, 40)}${pad(String(table.rows), 12)}${pad(mib(table.bytes), 10)}indexes ${mib(table.index_bytes)}`,
      ),
    `load average at the end: ${summary.loadAverage.map((value) => value.toFixed(2)).join(", ")}`,
    "",
  ];
  return lines.join("\n");
}

/**
 * The growing tables (scripts/bench/queryPlans.ts) that sequential scans read while the service
 * runs and nothing is asked of it, from PostgreSQL's own counters over `seconds`.
 */
async function wholeTableScansWhileIdle(
  admin: Database,
  seconds: number,
): Promise<{ table: string; scans: number; rows: number }[]> {
  const read = async () =>
    new Map(
      (
        await admin<{ relname: string; seq_scan: string; seq_tup_read: string }[]>`
          select relname, seq_scan::text, seq_tup_read::text from pg_stat_user_tables
          where relname in ${admin(GROWING)}`
      ).map((row) => [
        row.relname,
        { scans: Number(row.seq_scan), rows: Number(row.seq_tup_read) },
      ]),
    );
  const before = await read();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const after = await read();
  const scans: { table: string; scans: number; rows: number }[] = [];
  for (const [table, now] of after) {
    const then = before.get(table) ?? { scans: 0, rows: 0 };
    if (now.scans > then.scans && now.rows > then.rows) {
      scans.push({ table, scans: now.scans - then.scans, rows: now.rows - then.rows });
    }
  }
  return scans;
}
