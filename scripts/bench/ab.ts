import { execFile } from "node:child_process";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../../test/support/ports.ts";
import { type BenchProcess, startBenchProcess } from "./benchProcess.ts";
import { writeBenchResult } from "./benchResult.ts";
import { percentile, startBenchInfrastructure } from "./benchStack.ts";
import {
  type BenchRoute,
  benchRoutes,
  chosenRoutes,
  HTTP_BENCH_SERVICE_ENV,
  seedLedger,
} from "./httpRoutes.ts";
import { runLoad, unexpectedStatuses } from "./loadRounds.ts";

/**
 * `npm run bench:ab`: two builds of the service against each other, on one stack and in the same
 * minutes, for changes too small for `bench:http` to tell from the machine's noise (the same build
 * measured 85 to 184 µs per request in five runs within 25 minutes,
 * BENCHMARKS.md#the-machine).
 *
 * Build A is BENCH_AB_BASE (a git ref, HEAD by default), checked out in a temporary worktree
 * with this checkout's node_modules; build B is this checkout as it is, uncommitted changes
 * included. BENCH_AB_BASE=. runs this checkout in both slots: an A/A run, which shows the
 * method's own bias. Both serve HTTP only (ROLE=api) on the same Anvil, PostgreSQL and Ponder;
 * the workers run in a third process, of this checkout. For each route, BENCH_AB_ROUNDS rounds
 * (6): in each, A and B are loaded one after the other (autocannon, 50 connections,
 * BENCH_LOAD_SECONDS each), A first in even rounds and B first in odd ones, since the second of
 * two back-to-back runs measured ~10% better in an A/A run. Each run's CPU time per request of
 * the process under load (from /proc) and its req/s; printed: the medians and B over A.
 */

const CONNECTIONS = 50;
const SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 6);
const LEDGER_ENTRIES = 25;
const repositoryRoot = join(import.meta.dirname, "..", "..");
const run = promisify(execFile);

interface Side {
  cpuMicros: number[];
  rps: number[];
  errors: number;
}

interface SideResult {
  cpuMicros: number;
  rps: number;
  errors: number;
  /** Each round's CPU µs per request, in the order run. */
  rounds: number[];
}

export interface AbResult {
  route: string;
  a: SideResult;
  b: SideResult;
  /** B's median CPU per request over A's: below 1, B is cheaper. */
  cpuRatio: number;
  /** B's median req/s over A's: above 1, B is faster. */
  rpsRatio: number;
}

const base = process.env.BENCH_AB_BASE ?? "HEAD";
const baseRoot = base === "." ? repositoryRoot : await checkOut(base);
const infrastructure = await startBenchInfrastructure({ serviceEnv: HTTP_BENCH_SERVICE_ENV });
const stops: (() => Promise<void>)[] = [];
try {
  const startBuild = async (root: string, role: "api" | "worker") => {
    const port = await freePort();
    const started = await startBenchProcess({
      root,
      script: "api/main.ts",
      env: {
        ...infrastructure.env,
        ROLE: role,
        PORT: String(port),
        PUBLIC_URL: `http://127.0.0.1:${port}`,
      },
      readyPath: "/api/health",
      port,
    });
    stops.push(started.stop);
    return started;
  };
  // B first: its migrations are a superset of A's when it adds one (A skips what it knows).
  const b = await startBuild(repositoryRoot, "api");
  const a = await startBuild(baseRoot, "api");
  await startBuild(repositoryRoot, "worker");
  const claimIds = await seedLedger(infrastructure, b.url, LEDGER_ENTRIES);

  const results: AbResult[] = [];
  for (const route of chosenRoutes(benchRoutes(claimIds))) {
    const sides = { a: emptySide(), b: emptySide() };
    await loadOnce(a, route, 1);
    await loadOnce(b, route, 1);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? (["a", "b"] as const) : (["b", "a"] as const);
      for (const slot of order) {
        const measured = await loadOnce(slot === "a" ? a : b, route, SECONDS);
        sides[slot].cpuMicros.push(measured.cpuMicros);
        sides[slot].rps.push(measured.rps);
        sides[slot].errors += measured.errors;
      }
    }
    const result = summarize(route, sides);
    results.push(result);
    console.error(`  ${describe(result)}`);
  }
  console.log(report(base, results));
  await writeBenchResult({ base, rounds: ROUNDS, seconds: SECONDS, routes: results });
} finally {
  for (const stop of stops.reverse()) await stop();
  await infrastructure.stop();
  if (baseRoot !== repositoryRoot) {
    await run("git", ["worktree", "remove", "--force", baseRoot], { cwd: repositoryRoot });
  }
}

/** `ref` in a new worktree, sharing this checkout's installed packages. */
async function checkOut(ref: string): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), "bench-ab-"));
  await rm(directory, { recursive: true });
  await run("git", ["worktree", "add", "--detach", directory, ref], { cwd: repositoryRoot });
  await symlink(join(repositoryRoot, "node_modules"), join(directory, "node_modules"));
  return directory;
}

function emptySide(): Side {
  return { cpuMicros: [], rps: [], errors: 0 };
}

/** One saturated run against `target`: its req/s, CPU µs per request and wrong answers. */
async function loadOnce(target: BenchProcess, route: BenchRoute, seconds: number) {
  const before = await target.cpuSeconds();
  const result = await runLoad({
    url: `${target.url}${route.path}`,
    method: route.method,
    body: route.body,
    varyPayoutAddress: route.varyPayoutAddress,
    paths: route.paths,
    connections: CONNECTIONS,
    durationSeconds: seconds,
  });
  const used = (await target.cpuSeconds()) - before;
  return {
    rps: result.rps,
    cpuMicros: (used * 1e6) / Math.max(1, result.requests),
    errors: result.errors + unexpectedStatuses(result, route.expected),
  };
}

function summarize(route: BenchRoute, sides: { a: Side; b: Side }): AbResult {
  const side = ({ cpuMicros, rps, errors }: Side): SideResult => ({
    cpuMicros: percentile(cpuMicros, 50),
    rps: percentile(rps, 50),
    errors,
    rounds: cpuMicros.map(Math.round),
  });
  const a = side(sides.a);
  const b = side(sides.b);
  return { route: route.name, a, b, cpuRatio: b.cpuMicros / a.cpuMicros, rpsRatio: b.rps / a.rps };
}

function describe(result: AbResult): string {
  return `${result.route}: CPU µs per request A ${result.a.cpuMicros.toFixed(0)} (rounds ${result.a.rounds.join(", ")}), B ${result.b.cpuMicros.toFixed(0)} (${result.b.rounds.join(", ")}), B/A ${result.cpuRatio.toFixed(2)}; req/s A ${result.a.rps.toFixed(0)}, B ${result.b.rps.toFixed(0)} (B/A ${result.rpsRatio.toFixed(2)}); errors ${result.a.errors + result.b.errors}`;
}

function report(baseRef: string, results: AbResult[]): string {
  const pad = (text: string, width: number) => text.padEnd(width);
  return [
    "",
    `A = ${baseRef === "." ? "this checkout (A/A run)" : baseRef}, B = this checkout; medians of ${ROUNDS} rounds of ${SECONDS} s`,
    `${pad("route", 28)}${pad("CPU µs A", 10)}${pad("CPU µs B", 10)}${pad("B/A", 7)}${pad("req/s A", 9)}${pad("req/s B", 9)}${pad("B/A", 7)}errors`,
    ...results.map(
      (result) =>
        `${pad(result.route, 28)}${pad(result.a.cpuMicros.toFixed(0), 10)}${pad(result.b.cpuMicros.toFixed(0), 10)}${pad(result.cpuRatio.toFixed(2), 7)}${pad(result.a.rps.toFixed(0), 9)}${pad(result.b.rps.toFixed(0), 9)}${pad(result.rpsRatio.toFixed(2), 7)}${result.a.errors + result.b.errors}`,
    ),
    "",
  ].join("\n");
}
