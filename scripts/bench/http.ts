import { freePort } from "../../test/support/ports.ts";
import { samplePeakRss, startBenchProcess } from "./benchProcess.ts";
import { type RoundFigures, shareRange, writeBenchResult } from "./benchResult.ts";
import { startBenchInfrastructure } from "./benchStack.ts";
import { benchRoutes, chosenRoutes, HTTP_BENCH_SERVICE_ENV, seedLedger } from "./httpRoutes.ts";
import { alternateWithBare, runLoad, unexpectedStatuses } from "./loadRounds.ts";
import type { LoadResult, LoadSpec } from "./loadRunner.ts";

/**
 * `npm run bench:http` (method and results: BENCHMARKS.md#http-routes). The service as `node
 * api/main.ts` in a process of its own (rate limits off, no cap on open claims), a bare Express
 * JSON route in another, autocannon in a third. For each route, in one run, after a warm-up: the
 * bare route and the route at saturation (50 connections), alternated, bare first and last, over
 * BENCH_ROUNDS rounds (3); each round's share is its route's req/s over the mean of the bare runs
 * on either side, and the round with the median share is the one reported (with the range). Then
 * the route again at 80% of its saturation rate for its p99 under a load it can carry. The
 * service's resident memory is sampled throughout. BENCH_CPU_PROF=<dir> starts the service with
 * `node --cpu-prof` there; BENCH_ROUTES=<part>,<part> measures only the routes whose names contain
 * one of them.
 */

const CONNECTIONS = 50;
const SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 4);
const LEDGER_ENTRIES = Number(process.env.BENCH_LEDGER_ENTRIES ?? 25);
const ROUNDS = Math.max(1, Math.round(Number(process.env.BENCH_ROUNDS ?? 3)));
/**
 * Long enough for the route's code to reach V8's optimizing tier, its pools and caches to fill
 * and the work the seeding left (payouts, indexing) to end.
 */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);

export interface RouteResult {
  route: string;
  rps: number;
  bareRps: number;
  share: number;
  /** Every round, in the order they ran (`share` and the figures beside it are the median's). */
  rounds: RoundFigures[];
  target: number;
  p50: number;
  p99: number;
  p99At80: number;
  rateAt80: number;
  /** The service's CPU time per request at saturation, and bare Express's (µs). */
  cpuMicros: number;
  /**
   * The embedded PostgreSQL's CPU time per request over the median round's run (µs; Ponder's
   * and the workers' queries included), null on DATABASE_URL's server. It shares the cores with
   * the service and the load generator, so it is part of what a route that writes costs.
   */
  databaseCpuMicros: number | null;
  bareCpuMicros: number;
  /** Bare's CPU per request over the route's: the share a CPU-bound server would keep. */
  cpuShare: number;
  errors: number;
  loadGeneratorCpu: number;
}

const infrastructure = await startBenchInfrastructure({ serviceEnv: HTTP_BENCH_SERVICE_ENV });
const stops: (() => Promise<void>)[] = [];
try {
  const port = await freePort();
  const cpuProfileDirectory = process.env.BENCH_CPU_PROF;
  const service = await startBenchProcess({
    script: "api/main.ts",
    env: { ...infrastructure.env, PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` },
    nodeArgs: cpuProfileDirectory ? ["--cpu-prof", `--cpu-prof-dir=${cpuProfileDirectory}`] : [],
    readyPath: "/api/health",
    port,
    // BENCH_SERVICE_LOG=<file>: the service's own lines (LOG_LEVEL=info writes one a request).
    ...(process.env.BENCH_SERVICE_LOG ? { logFile: process.env.BENCH_SERVICE_LOG } : {}),
  });
  stops.push(service.stop);
  const bare = await startBenchProcess({ script: "scripts/bench/bareServer.ts", env: {} });
  stops.push(bare.stop);

  const claimIds = await seedLedger(infrastructure, service.url, LEDGER_ENTRIES);
  const idleRssMiB = await service.rssMiB();
  const routes = benchRoutes(claimIds);

  const load = (url: string, extra: Partial<LoadSpec> & Pick<LoadSpec, "method">) =>
    runLoad({ url, connections: CONNECTIONS, durationSeconds: SECONDS, ...extra });
  const bareUrl = `${bare.url}/bare`;
  const bareBody = { payout_address: "0x000000000000000000000000000000000000dEaD" };

  // Is autocannon the bottleneck? Bare Express with one autocannon thread and with two: if two
  // threads get markedly more out of the same server, one thread was not enough.
  await load(bareUrl, { method: "GET", durationSeconds: 1 });
  const oneWorker = await load(bareUrl, { method: "GET" });
  const twoWorkers = await load(bareUrl, { method: "GET", workers: 2 });

  const chosen = chosenRoutes(routes);
  const results: RouteResult[] = [];
  const rss = samplePeakRss(service);
  for (const route of chosen) {
    const url = `${service.url}${route.path}`;
    const spec = {
      method: route.method,
      body: route.body,
      varyPayoutAddress: route.varyPayoutAddress,
      paths: route.paths,
    };
    const bareSpec = { method: route.method, body: route.method === "POST" ? bareBody : undefined };
    await load(url, { ...spec, durationSeconds: WARMUP_SECONDS });
    const { rounds, median } = await alternateWithBare({
      rounds: ROUNDS,
      service,
      route: () => load(url, spec),
      bare,
      bareRoute: () => load(bareUrl, bareSpec),
      databaseCpuSeconds: infrastructure.databaseCpuSeconds,
    });
    const { saturated, bareRps, bareCpuMicros, databaseCpuMicros } = median;
    const rateAt80 = Math.round(saturated.rps * 0.8);
    const paced = await load(url, { ...spec, overallRate: rateAt80 });
    results.push({
      route: route.name,
      rps: saturated.rps,
      bareRps,
      share: median.share,
      rounds: rounds.map((round) => ({
        share: round.share,
        rps: round.saturated.rps,
        cpuMicros: round.saturated.cpuMicros,
      })),
      target: route.target,
      p50: saturated.p50,
      p99: saturated.p99,
      p99At80: paced.p99,
      rateAt80,
      cpuMicros: saturated.cpuMicros,
      databaseCpuMicros,
      bareCpuMicros,
      cpuShare: bareCpuMicros / saturated.cpuMicros,
      errors:
        rounds.reduce((sum, round) => sum + errorsOf(round.saturated, route.expected), 0) +
        errorsOf(paced, route.expected),
      loadGeneratorCpu: saturated.loadGeneratorCpu,
    });
    console.error(`  ${route.name}: ${describe(results.at(-1) as RouteResult)}`);
  }
  const peakRssMiB = rss.stop();

  const summary = {
    loadGenerator: {
      bareOneWorkerRps: oneWorker.rps,
      bareTwoWorkersRps: twoWorkers.rps,
      oneWorkerCpu: oneWorker.loadGeneratorCpu,
      twoWorkersCpu: twoWorkers.loadGeneratorCpu,
    },
    service: { idleRssMiB, peakRssMiB },
    routes: results,
  };
  console.log(report(summary));
  await writeBenchResult(summary);
} finally {
  for (const stop of stops.reverse()) await stop();
  await infrastructure.stop();
}

function errorsOf(result: LoadResult, expected: number): number {
  return result.errors + unexpectedStatuses(result, expected);
}

function describe(result: RouteResult): string {
  const rounds = result.rounds
    .map(
      (round) =>
        `${(round.share * 100).toFixed(0)}% (${round.rps.toFixed(0)}/s, ${round.cpuMicros.toFixed(0)} µs)`,
    )
    .join(", ");
  return `${result.rps.toFixed(0)} req/s, ${(result.share * 100).toFixed(0)}% of bare (${result.bareRps.toFixed(0)}; rounds in order ${rounds}), CPU ${result.cpuMicros.toFixed(0)} µs/request (bare ${result.bareCpuMicros.toFixed(0)}, ${(result.cpuShare * 100).toFixed(0)}%), database ${result.databaseCpuMicros?.toFixed(0) ?? "?"} µs/request, p50 ${result.p50} ms, p99 ${result.p99} ms, p99 at 80% ${result.p99At80} ms, errors ${result.errors}`;
}

function report(summary: {
  loadGenerator: Record<string, number>;
  service: { idleRssMiB: number; peakRssMiB: number };
  routes: RouteResult[];
}): string {
  const pad = (text: string, width: number) => text.padEnd(width);
  const lines = [
    "",
    `${pad("route", 28)}${pad("req/s", 8)}${pad("bare", 8)}${pad("share", 14)}${pad("rounds", 10)}${pad("CPU µs (bare)", 15)}${pad("CPU share", 11)}${pad("DB µs", 7)}${pad("p50", 7)}${pad("p99", 7)}${pad("p99@80%", 9)}errors`,
    ...summary.routes.map(
      (route) =>
        `${pad(route.route, 28)}${pad(route.rps.toFixed(0), 8)}${pad(route.bareRps.toFixed(0), 8)}${pad(`${(route.share * 100).toFixed(0)}% (≥${route.target * 100}%)`, 14)}${pad(
          shareRange(route)
            .map((share) => (share * 100).toFixed(0))
            .join("–"),
          10,
        )}${pad(`${route.cpuMicros.toFixed(0)} (${route.bareCpuMicros.toFixed(0)})`, 15)}${pad(`${(route.cpuShare * 100).toFixed(0)}%`, 11)}${pad(route.databaseCpuMicros?.toFixed(0) ?? "?", 7)}${pad(`${route.p50}`, 7)}${pad(`${route.p99}`, 7)}${pad(`${route.p99At80}`, 9)}${route.errors}`,
    ),
    `Service RSS: ${summary.service.idleRssMiB.toFixed(0)} MiB idle, ${summary.service.peakRssMiB.toFixed(0)} MiB peak under load`,
    `autocannon: bare ${summary.loadGenerator.bareOneWorkerRps?.toFixed(0)} req/s with 1 thread (its CPU ${summary.loadGenerator.oneWorkerCpu?.toFixed(2)} cores), ${summary.loadGenerator.bareTwoWorkersRps?.toFixed(0)} with 2 (${summary.loadGenerator.twoWorkersCpu?.toFixed(2)} cores)`,
    "",
  ];
  return lines.join("\n");
}
