import { loadavg } from "node:os";
import postgres from "postgres";
import type { IncomingTransfer } from "../../api/chain/incomingTransfers.ts";
import type { Database, Sql } from "../../api/db/connect.ts";
import { encodeLedgerCursor, type LedgerCursor } from "../../api/schemas/ledgerCursor.ts";
import { freePort } from "../../test/support/ports.ts";
import { type BenchProcess, startBenchProcess } from "./benchProcess.ts";
import { type RoundFigures, writeBenchResult } from "./benchResult.ts";
import { startBenchInfrastructure } from "./benchStack.ts";
import {
  type BenchRoute,
  benchRoutes,
  chosenRoutes,
  HTTP_BENCH_SERVICE_ENV,
  seedLedger,
} from "./httpRoutes.ts";
import { alternateWithBare, runLoad, unexpectedStatuses } from "./loadRounds.ts";
import { BOUNDED_BY_AMOUNT_SPACE, GROWING } from "./queryPlans.ts";
import { type LoopFigures, measureLoops } from "./scaleLoops.ts";
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
 * Each route: a 1 s warm-up, then BENCH_ROUNDS rounds (3) alternated with bare Express as
 * bench:http runs them (loadRounds.ts alternateWithBare), each run BENCH_LOAD_SECONDS (2); the
 * median round is reported with the rounds' range. BENCH_SCALE (default 1: 10 million claims)
 * shrinks the year; BENCH_ROUTES=<part>,… measures only some routes; BENCH_PG_SHARED_BUFFERS
 * (3GB) sizes the embedded PostgreSQL's buffers; BENCH_HOLD=1 keeps the year running afterwards
 * (its addresses printed) for a look at it by hand, until SIGUSR2.
 */

const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 2);
const ROUNDS = Math.max(1, Math.round(Number(process.env.BENCH_ROUNDS ?? 3)));
const CONNECTIONS = 50;
const RATIO_TARGET = 1.25;
/** A deep page must hold a full page on both databases, or the two are not like for like. */
const PAGE = 20;
/** Entries before the deep pages on a ledger big enough (the year's). */
const DEEP = 100_000;
const BARE_POST_BODY = { payout_address: "0x000000000000000000000000000000000000dEaD" };
const IDLE_SECONDS = 20;
/** BENCH_HOLD=1: the year, its service and PostgreSQL kept running after the figures (SIGUSR2 ends). */
const HOLD = process.env.BENCH_HOLD === "1";

const infrastructure = await startBenchInfrastructure({
  serviceEnv: HTTP_BENCH_SERVICE_ENV,
  // Sized as an operator sizes a server holding a year (13 GB at scale 1): PostgreSQL's default
  // 128 MB kept few of the big tables' index pages, and each claim creation read its pages of
  // the claims' indexes again (BENCHMARKS.md#a-year-of-traffic). Both databases run with it.
  postgresSettings: { shared_buffers: process.env.BENCH_PG_SHARED_BUFFERS ?? "3GB" },
});
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
  const empty = await measure({ service, bare, claimIds, paymentTx });
  // Not worth writing a year for: the deep pages would not compare like for like.
  const emptyPagesShort = shortPages(empty);
  if (emptyPagesShort.length > 0) {
    throw new Error(`Deep pages on the empty database:\n  ${emptyPagesShort.join("\n  ")}`);
  }
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
  const year = await measure({ service, bare, claimIds, paymentTx });
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
    rounds: ROUNDS,
    loadSeconds: SECONDS,
    measureSeconds: { empty: empty.seconds, year: year.seconds },
    deepPageAfter: { empty: empty.deep.depth, year: year.deep.depth },
    routes: empty.routes.map((route) => ({
      ...route,
      year: year.routes.find((other) => other.name === route.name),
    })),
    probes: empty.probes.map((probe) => {
      const big = year.probes.find((other) => other.name === probe.name);
      return {
        ...probe,
        yearMs: big?.medianMs,
        yearScans: big?.scans ?? [],
        yearPlannedEachCall: big?.plannedEachCall ?? 0,
      };
    }),
    loops: { empty: empty.loops, year: year.loops },
    loadAverage: loadavg(),
  };
  console.log(report(summary));
  await writeBenchResult(summary);
  // A bounded table read whole is reported above, not failed (queryPlans.ts).
  const unbounded = (table: string) => !BOUNDED_BY_AMOUNT_SPACE.includes(table);
  const failures = [
    ...idle
      .filter((scan) => unbounded(scan.table))
      .map((scan) => `the idle service: scans ${scan.table} (${scan.scans} times)`),
    ...summary.probes
      .filter((probe) => probe.yearScans.some(unbounded))
      .map((probe) => `${probe.name}: scans ${probe.yearScans.filter(unbounded).join(", ")}`),
  ];
  if (failures.length > 0) {
    console.error(
      `Plans that scan a growing table on the year's database:\n  ${failures.join("\n  ")}`,
    );
    process.exitCode = 1;
  }
  for (const [side, loops] of Object.entries(summary.loops)) {
    if (loops.completed < loops.payments) {
      console.error(
        `The ${side} database's loop: ${loops.matched} of ${loops.payments} payments matched, ${loops.completed} completed`,
      );
      process.exitCode = 1;
    }
  }
  const yearPagesShort = shortPages(year);
  if (yearPagesShort.length > 0) {
    console.error(`Deep pages on the year's database:\n  ${yearPagesShort.join("\n  ")}`);
    process.exitCode = 1;
  }
  if (HOLD) await holdForInvestigation(service.url);
} finally {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await admin.end();
  await infrastructure.stop();
}

/** What `measure` loads: the running service and bare Express, and what the seeding made. */
interface Stack {
  service: BenchProcess;
  bare: BenchProcess;
  claimIds: string[];
  paymentTx: string;
}

/** One database's figures. */
interface Measurement {
  deep: DeepCursor;
  routes: RouteFigures[];
  probes: ProbeResult[];
  /** 1,000 payments in one block, matched and paid out on the chain (scaleLoops.ts). */
  loops: LoopFigures;
  /** The whole of `measure`, wall time. */
  seconds: number;
}

interface RouteFigures {
  name: string;
  /** The median round's (by share of bare, as bench:http reports it). */
  rps: number;
  bareRps: number;
  share: number;
  /** Every round, in the order they ran. */
  rounds: RoundFigures[];
  p50: number;
  p99: number;
  /** The service's and the embedded PostgreSQL's CPU per request, µs (null on DATABASE_URL's). */
  cpuMicros: number;
  databaseCpuMicros: number | null;
  /** Over every round. */
  errors: number;
  read: boolean;
  /** The entries a ledger page answered (its deep routes); null for any other route. */
  entries: number | null;
}

/** A route of bench:scale; a deep ledger page says how to count the entries of its answer. */
type ScaleRoute = BenchRoute & { countEntries?: (body: string) => number };

/** Every route at saturation against bare Express, then the hot reads called directly. */
async function measure(stack: Stack): Promise<Measurement> {
  const started = performance.now();
  const deep = await deepCursor(admin);
  log(`  deep pages: the ${PAGE} entries after entry ${deep.depth}`);
  const routes = await measureRoutes(stack, [
    ...benchRoutes(stack.claimIds),
    ...scaleRoutes(stack.paymentTx, encodeLedgerCursor(deep.cursor)),
  ]);
  const probes = await measureProbes(deep.cursor);
  // Last: its 1,000 completed claims would otherwise be in the routes' and reads' database.
  const loops = await measureLoops(infrastructure, {
    serviceUrl: stack.service.url,
    sql: admin,
    log,
  });
  const seconds = (performance.now() - started) / 1000;
  log(`  measured in ${seconds.toFixed(0)} s`);
  return { deep, routes, probes, loops, seconds };
}

/** Each route after a 1 s warm-up: ROUNDS rounds alternated with bare Express (loadRounds.ts). */
async function measureRoutes(stack: Stack, routes: ScaleRoute[]): Promise<RouteFigures[]> {
  const results: RouteFigures[] = [];
  for (const route of chosenRoutes(routes)) {
    const url = `${stack.service.url}${route.path}`;
    const load = { connections: CONNECTIONS, durationSeconds: SECONDS };
    const spec = {
      method: route.method,
      body: route.body,
      varyPayoutAddress: route.varyPayoutAddress,
      paths: route.paths,
      ...load,
    };
    const bareSpec = {
      url: `${stack.bare.url}/bare`,
      method: route.method,
      body: route.method === "POST" ? BARE_POST_BODY : undefined,
      ...load,
    };
    const entries = route.countEntries ? await pageEntries(url, route) : null;
    await runLoad({ url, ...spec, durationSeconds: 1 });
    const { rounds, median } = await alternateWithBare({
      rounds: ROUNDS,
      service: stack.service,
      route: () => runLoad({ url, ...spec }),
      bare: stack.bare,
      bareRoute: () => runLoad(bareSpec),
      databaseCpuSeconds: infrastructure.databaseCpuSeconds,
    });
    const figures: RouteFigures = {
      name: route.name,
      rps: median.saturated.rps,
      bareRps: median.bareRps,
      share: median.share,
      rounds: rounds.map((round) => ({
        share: round.share,
        rps: round.saturated.rps,
        cpuMicros: round.saturated.cpuMicros,
      })),
      p50: median.saturated.p50,
      p99: median.saturated.p99,
      cpuMicros: median.saturated.cpuMicros,
      databaseCpuMicros: median.databaseCpuMicros,
      errors: rounds.reduce(
        (sum, round) =>
          sum + round.saturated.errors + unexpectedStatuses(round.saturated, route.expected),
        0,
      ),
      read: route.method === "GET" || route.name.includes("graphql"),
      entries,
    };
    results.push(figures);
    log(
      `  ${route.name}: ${figures.rps.toFixed(0)} req/s (rounds ${range(
        figures.rounds.map((round) => round.rps),
        (rps) => rps.toFixed(0),
      )}), ${percent(figures.share)} of bare (${range(
        figures.rounds.map((round) => round.share),
        percent,
      )}), p99 ${figures.p99} ms, CPU ${figures.cpuMicros.toFixed(0)} µs a request (PostgreSQL ${figures.databaseCpuMicros?.toFixed(0) ?? "?"})${entries === null ? "" : `, ${entries} entries`}`,
    );
  }
  return results;
}

/** The hot reads (scaleQueries.ts), the deep page's at `deepCursor`. */
async function measureProbes(cursor: LedgerCursor): Promise<ProbeResult[]> {
  const head = await infrastructure.client.getBlockNumber({ cacheTime: 0 });
  const probes = await runProbes(infrastructure.databaseUrl, {
    chainId: 8453,
    deepCursor: cursor,
    blockOfTransfers: busyBlock(head + 1n),
    confirmedThrough: head - 3n,
  });
  for (const probe of probes) {
    log(
      `  ${probe.name}: ${probe.medianMs.toFixed(2)} ms${probe.scans.length ? ` (scans ${probe.scans.join(", ")})` : ""}${probe.plannedEachCall ? ` (${probe.plannedEachCall} statement(s) planned on every call)` : ""}`,
    );
  }
  return probes;
}

/** The deep pages whose answer was not a full page: such a pair compares nothing. */
function shortPages(measurement: Measurement): string[] {
  return measurement.routes
    .filter((route) => route.entries !== null && route.entries !== PAGE)
    .map((route) => `${route.name}: ${route.entries} entries, not ${PAGE}`);
}

/** The entries of one answer of `route`, fetched once before its load. */
async function pageEntries(url: string, route: ScaleRoute): Promise<number> {
  const response = await fetch(url, {
    method: route.method,
    headers: { "content-type": "application/json" },
    body: route.body === undefined ? undefined : JSON.stringify(route.body),
  });
  const body = await response.text();
  try {
    if (response.status !== route.expected) throw new Error(`status ${response.status}`);
    return route.countEntries?.(body) ?? 0;
  } catch (error) {
    throw new Error(`${route.name}: no page of entries (${error}): ${body.slice(0, 300)}`);
  }
}

/** The routes bench:http does not load: health, the explainer, deep ledger pages, the stats. */
function scaleRoutes(paymentTx: string, cursor: string): ScaleRoute[] {
  const deepQuery = `{ ledger(first: ${PAGE}, after: "${cursor}") { edges { node { claimId payoutTx completedAt } } pageInfo { hasNextPage endCursor } } }`;
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
      countEntries: (body) => (JSON.parse(body) as { entries: unknown[] }).entries.length,
    },
    {
      name: "GET /ledger (HTML, deep)",
      method: "GET",
      path: `/ledger?cursor=${cursor}`,
      expected: 200,
      target: 0.5,
      // One row a entry (api/pages/renderLedgerPage.ts), its first cell the completion time.
      countEntries: (body) => body.split('<td data-label="Completed">').length - 1,
    },
    {
      name: "POST /graphql (deep)",
      method: "POST",
      path: "/graphql",
      body: { query: deepQuery },
      expected: 200,
      target: 0.5,
      countEntries: (body) =>
        (JSON.parse(body) as { data: { ledger: { edges: unknown[] } } }).data.ledger.edges.length,
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

interface DeepCursor {
  cursor: LedgerCursor;
  /** The entries before the page, newest first (100,000 on a big enough ledger). */
  depth: number;
}

/**
 * Where the deep pages start: after the entry 100,000 deep, or on a smaller ledger as deep as
 * still leaves a full page after it (the 5th of 25), so that both databases answer 20 entries.
 */
async function deepCursor(sql: Sql): Promise<DeepCursor> {
  const [row] = await sql<{ id: string; at: string; depth: number }[]>`
    select id, to_char(completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at,
      depth::int4 as depth
    from (
      select id, completed_at, count(*) over () as entries,
        row_number() over (order by completed_at desc, id collate "C" desc) as depth
      from (select id, completed_at from app.claims
        where status = 'completed' and completed_at is not null
        order by completed_at desc, id collate "C" desc limit ${DEEP + PAGE}) newest
    ) numbered
    where depth = least(${DEEP}::int8, entries - ${PAGE})`;
  if (!row) throw new Error(`the ledger holds fewer than ${PAGE + 1} entries: no deep page`);
  return { cursor: { completedAt: row.at, claimId: row.id }, depth: row.depth };
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
  rounds: number;
  loadSeconds: number;
  measureSeconds: { empty: number; year: number };
  deepPageAfter: { empty: number; year: number };
  routes: (RouteFigures & { year?: RouteFigures | undefined })[];
  probes: (ProbeResult & {
    yearMs?: number | undefined;
    yearScans: string[];
    yearPlannedEachCall: number;
  })[];
  loops: { empty: LoopFigures; year: LoopFigures };
  loadAverage: number[];
}): string {
  const pad = (text: string, width: number) => text.padEnd(width);
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  const rps = (rps: number) => rps.toFixed(0);
  const probeMs = (part: string) => {
    const probe = summary.probes.find((candidate) => candidate.name.startsWith(part));
    return `${probe?.medianMs.toFixed(2) ?? "?"} / ${probe?.yearMs?.toFixed(2) ?? "?"} ms`;
  };
  const cpuOf = (route: RouteFigures) =>
    `${route.cpuMicros.toFixed(0)}+${route.databaseCpuMicros?.toFixed(0) ?? "?"}`;
  const lines = [
    "",
    `A year at scale ${summary.scale}: ${summary.shape.claims} claims, ${summary.shape.completed} completed, ${summary.shape.unmatched} unmatched; written in ${summary.fillSeconds.toFixed(0)} s; service answered ${summary.startSeconds.toFixed(1)} s after start (${summary.emptyStartSeconds.toFixed(1)} s on the empty database)`,
    `attention checked through the year in ${summary.attention.seconds.toFixed(1)} s (${summary.attention.steps} steps, the longest ${summary.attention.longestMs.toFixed(0)} ms)`,
    `each route: ${summary.rounds} rounds of ${summary.loadSeconds} s alternated with bare Express, the median round's figures with the rounds' range in brackets; measured in ${summary.measureSeconds.empty.toFixed(0)} s on the empty database, ${summary.measureSeconds.year.toFixed(0)} s on the year`,
    "",
    `${pad("route", 28)}${pad("empty req/s", 20)}${pad("year req/s", 20)}${pad("slowdown", 19)}${pad("year share", 16)}${pad("p99 e/y ms", 12)}${pad("page e/y", 10)}errors e/y`,
    ...summary.routes.map((route) => {
      const year = route.year;
      const emptyRps = route.rounds.map((round) => round.rps);
      const yearRps = year?.rounds.map((round) => round.rps) ?? [Number.NaN];
      const slowdown = route.rps / (year?.rps ?? Number.NaN);
      // Every pairing of an empty round with a year round lies within these.
      const least = Math.min(...emptyRps) / Math.max(...yearRps);
      const most = Math.max(...emptyRps) / Math.min(...yearRps);
      const shares = year?.rounds.map((round) => round.share) ?? [Number.NaN];
      const flag =
        (slowdown > RATIO_TARGET && least > RATIO_TARGET) ||
        (route.read && (year?.share ?? 0) < 0.5)
          ? " ✗"
          : slowdown > RATIO_TARGET
            ? " ?"
            : "";
      return `${pad(route.name, 28)}${pad(`${rps(route.rps)} (${range(emptyRps, rps)})`, 20)}${pad(`${year ? rps(year.rps) : "?"} (${range(yearRps, rps)})`, 20)}${pad(`${slowdown.toFixed(2)}× (${least.toFixed(2)}–${most.toFixed(2)})`, 19)}${pad(`${percent(year?.share ?? Number.NaN)} (${range(shares, percent)})`, 16)}${pad(`${route.p99}/${year?.p99 ?? "?"}`, 12)}${pad(route.entries === null ? "" : `${route.entries}/${year?.entries ?? "?"}`, 10)}${route.errors}/${year?.errors ?? "?"}${flag}`;
    }),
    `✗: past ${RATIO_TARGET}× whichever rounds are paired, or a read under 50% of bare on the year; ?: past it at the median but not in every pairing (noise, or a small slowdown)`,
    `deep pages: the ${PAGE} entries after entry ${summary.deepPageAfter.empty} (empty) and ${summary.deepPageAfter.year} (year); the read itself ${probeMs("ledger: page")} (empty / year), the first page's ${probeMs("ledger: first page")}`,
    `  CPU a request, service + PostgreSQL, empty / year: ${summary.routes
      .filter((route) => route.entries !== null)
      .map((route) => `${route.name} ${cpuOf(route)} / ${route.year ? cpuOf(route.year) : "?"} µs`)
      .join(", ")}`,
    "",
    `${pad("read", 40)}${pad("empty ms", 10)}${pad("year ms", 10)}${pad("slowdown", 10)}${pad("planned each call e/y", 24)}scans on the year`,
    ...summary.probes.map((probe) => {
      const slowdown = (probe.yearMs ?? Number.NaN) / probe.medianMs;
      return `${pad(probe.name, 40)}${pad(probe.medianMs.toFixed(2), 10)}${pad(probe.yearMs?.toFixed(2) ?? "?", 10)}${pad(`${slowdown.toFixed(1)}×`, 10)}${pad(`${probe.plannedEachCall} / ${probe.yearPlannedEachCall}`, 24)}${probe.yearScans.join(", ") || "none"}`;
    }),
    "",
    `${pad("1,000 payments in one block", 40)}${pad("empty s", 10)}${pad("year s", 10)}slowdown`,
    ...(
      [
        ["indexed (the confirmation block)", "indexedSeconds"],
        ["matched (from the payments' block)", "matchedSeconds"],
        ["the matcher's own time", "matcherSeconds"],
        ["every payout signed", "signedSeconds"],
        ["every payout broadcast", "broadcastSeconds"],
        ["every claim completed", "completedSeconds"],
      ] as const
    ).map(([name, key]) => {
      const empty = summary.loops.empty[key];
      const year = summary.loops.year[key];
      return `${pad(name, 40)}${pad(empty.toFixed(2), 10)}${pad(year.toFixed(2), 10)}${(year / empty).toFixed(2)}×`;
    }),
    `  claims opened without a unique amount on the way to 1,000 with one (left unpaid): ${summary.loops.empty.withoutUniqueAmount}/${summary.loops.year.withoutUniqueAmount}`,
    `  matched ${summary.loops.empty.matched}/${summary.loops.year.matched}, completed ${summary.loops.empty.completed}/${summary.loops.year.completed} (empty / year); payouts in ${summary.loops.empty.payoutBlocks}/${summary.loops.year.payoutBlocks} blocks of ${summary.loops.empty.blockTimeSeconds} s`,
    "",
    "row widths (bytes): real rows / written rows",
    ...summary.widths.map((width) => `  ${pad(width.table, 24)}${width.real} / ${width.written}`),
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

function percent(share: number): string {
  return `${(share * 100).toFixed(0)}%`;
}

/** `low–high` of `values`, each written by `format`. */
function range(values: number[], format: (value: number) => string): string {
  return `${format(Math.min(...values))}–${format(Math.max(...values))}`;
}

/**
 * Until SIGUSR2: the year's database and service stay up for psql and curl, then the run ends as
 * it would have (its exit code kept). ^C instead stops everything at once (benchStack.ts).
 */
async function holdForInvestigation(serviceUrl: string): Promise<void> {
  log(
    `holding the year (kill -USR2 ${process.pid} to end): DATABASE_URL=${infrastructure.databaseUrl} service ${serviceUrl}`,
  );
  await new Promise<void>((resolve) => process.once("SIGUSR2", () => resolve()));
}
