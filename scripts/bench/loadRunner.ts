import { randomBytes } from "node:crypto";
import autocannon from "autocannon";

/**
 * One autocannon run in a process of its own, so the load generator never shares an event loop
 * with what it measures, and its own CPU time can be reported:
 * `node loadRunner.ts '<LoadSpec as JSON>'` prints a LoadResult as JSON.
 */

export interface LoadSpec {
  url: string;
  method: "GET" | "POST";
  body?: unknown;
  connections: number;
  durationSeconds: number;
  /** Requests per second over all connections; unset: as fast as the server answers. */
  overallRate?: number;
  /** Worker threads for autocannon itself; unset: its main thread only. */
  workers?: number;
  /** A new random payout_address in each request's body (POST /api/claims). */
  varyPayoutAddress?: boolean;
  /** Paths on `url`'s server taken in turn, one per request (many clients' claims). */
  paths?: string[];
}

export interface LoadResult {
  rps: number;
  /** Responses received over the run. */
  requests: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
  /** Connection errors and timeouts. */
  errors: number;
  /** The load generator's own CPU time over the wall time (1 = one core busy). */
  loadGeneratorCpu: number;
}

const spec = JSON.parse(process.argv[2] ?? "") as LoadSpec;
const headers = { "content-type": "application/json" };
const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
const cpuBefore = process.cpuUsage();
const started = performance.now();
const result = await autocannon({
  url: spec.url,
  method: spec.method,
  headers,
  body,
  connections: spec.connections,
  duration: spec.durationSeconds,
  ...(spec.overallRate ? { overallRate: spec.overallRate } : {}),
  ...(spec.workers ? { workers: spec.workers } : {}),
  ...(spec.varyPayoutAddress
    ? {
        requests: [
          {
            setupRequest: (request: autocannon.Request) => ({
              ...request,
              body: JSON.stringify({
                ...(spec.body as object),
                payout_address: `0x${randomBytes(20).toString("hex")}`,
              }),
            }),
          },
        ],
      }
    : {}),
  ...(spec.paths?.length ? { requests: [{ setupRequest: nextPath(spec.paths) }] } : {}),
});
const cpu = process.cpuUsage(cpuBefore);

function nextPath(paths: string[]) {
  let turn = 0;
  return (request: autocannon.Request) => ({ ...request, path: paths[turn++ % paths.length] });
}
const wallMs = performance.now() - started;
const statuses = Object.fromEntries(
  Object.entries(
    (result as unknown as { statusCodeStats: Record<string, { count: number }> }).statusCodeStats,
  ).map(([status, { count }]) => [status, Number(count)]),
);
const output: LoadResult = {
  rps: result.requests.average,
  requests: result.requests.total,
  p50: result.latency.p50,
  p99: result.latency.p99,
  statuses,
  errors: result.errors + result.timeouts,
  loadGeneratorCpu: (cpu.user + cpu.system) / 1000 / wallMs,
};
console.log(JSON.stringify(output));
