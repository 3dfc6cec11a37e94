import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import {
  checkHealth,
  type HealthReport,
  serviceHealthDependencies,
} from "../health/checkHealth.ts";
import { withTimeout } from "../withTimeout.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { CLAIM_STATUSES, readStatusCounts, type StatusCounts } from "./readStatusCounts.ts";

/** A scrape reads the database and the RPC at most this often; scrapes in between share it. */
const SNAPSHOT_TTL_MS = 2_000;
const SNAPSHOT_TIMEOUT_MS = 2_000;

export interface ServiceMetrics {
  httpRequests: Counter<"method" | "route" | "status">;
  httpDuration: Histogram<"method" | "route" | "status">;
  contentType: string;
  /** The exposition text. Never throws for a dependency that is down: its values are absent. */
  render(): Promise<string>;
}

const metricsByService = new WeakMap<ServiceDeps, ServiceMetrics>();

/**
 * The metrics of one service (one `deps`): the HTTP middleware records into them and
 * GET /metrics renders them, so both must get the same object for the same service.
 */
export function serviceMetrics(deps: ServiceDeps): ServiceMetrics {
  let metrics = metricsByService.get(deps);
  if (!metrics) {
    metrics = createServiceMetrics(deps);
    metricsByService.set(deps, metrics);
  }
  return metrics;
}

let processRegistry: Registry | undefined;

/** Node's own metrics (CPU, memory, event loop), once per process. */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

interface Snapshot {
  health: HealthReport;
  counts: StatusCounts | null;
}

function createServiceMetrics(deps: ServiceDeps): ServiceMetrics {
  const registry = new Registry();
  const registers = [registry];
  const httpRequests = new Counter({
    name: "http_requests_total",
    help: "HTTP requests answered, by method, route pattern and status.",
    labelNames: ["method", "route", "status"] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: "http_request_duration_seconds",
    help: "Time to answer HTTP requests, by method, route pattern and status.",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });

  // Read from the database and the RPC at scrape time: the same numbers on every replica.
  // A value that cannot be read is left out, never reported as 0.
  const up = new Gauge({
    name: "pay_and_earn_dependency_up",
    help: "1 when the dependency answered the last check, else 0.",
    labelNames: ["dependency"] as const,
    registers,
  });
  const health = new Gauge({
    name: "pay_and_earn_health_status",
    help: "1 for the current status of GET /api/health (ok, degraded, down), 0 for the others.",
    labelNames: ["status"] as const,
    registers,
  });
  const claims = new Gauge({
    name: "pay_and_earn_claims",
    help: "Claims by status.",
    labelNames: ["status"] as const,
    registers,
  });
  const payouts = new Counter({
    name: "pay_and_earn_payouts_total",
    help: "Payouts by event: sent (broadcast at least once), confirmed (mined), reverted.",
    labelNames: ["event"] as const,
    registers,
  });
  const lag = new Gauge({
    name: "pay_and_earn_lag_blocks",
    help: "Blocks behind: the indexer behind the chain head, the matcher behind the confirmed transfers.",
    labelNames: ["component"] as const,
    registers,
  });
  const backlogItems = new Gauge({
    name: "pay_and_earn_backlog_items",
    help: "Work waiting: matcher (confirmed transfers), payout_sender (paid claims), payout_confirmer (unmined payouts).",
    labelNames: ["queue"] as const,
    registers,
  });
  const backlogAge = new Gauge({
    name: "pay_and_earn_backlog_oldest_seconds",
    help: "Age of the oldest item waiting in each queue (0 when none waits).",
    labelNames: ["queue"] as const,
    registers,
  });
  const wallet = new Gauge({
    name: "pay_and_earn_payout_wallet_balance",
    help: "The payout wallet's balance, in whole units of the asset (usdc, eth).",
    labelNames: ["asset"] as const,
    registers,
  });

  const snapshot = sharedFor(SNAPSHOT_TTL_MS, async (): Promise<Snapshot> => {
    const [report, counts] = await Promise.all([
      checkHealth({ ...serviceHealthDependencies(deps), timeoutMs: SNAPSHOT_TIMEOUT_MS }),
      withTimeout(readStatusCounts(deps.sql), SNAPSHOT_TIMEOUT_MS, "the status counts").catch(
        (error: unknown) => {
          deps.logger.warn({ err: error }, "metrics: status counts unreadable");
          return null;
        },
      ),
    ]);
    return { health: report, counts };
  });

  function show({ health: report, counts }: Snapshot): void {
    for (const gauge of [up, health, claims, lag, backlogItems, backlogAge, wallet]) gauge.reset();
    payouts.reset();
    up.set({ dependency: "database" }, report.database.ok ? 1 : 0);
    up.set({ dependency: "rpc" }, report.chain.ok ? 1 : 0);
    for (const status of ["ok", "degraded", "down"]) {
      health.set({ status }, report.status === status ? 1 : 0);
    }
    if (report.indexer.lag_blocks !== null) {
      lag.set({ component: "indexer" }, report.indexer.lag_blocks);
    }
    const backlog = report.backlog;
    if (backlog?.matcher) {
      lag.set({ component: "matcher" }, backlog.matcher.lag_blocks);
      backlogItems.set({ queue: "matcher" }, backlog.matcher.waiting_transfers);
      backlogAge.set({ queue: "matcher" }, backlog.matcher.oldest_waiting_seconds ?? 0);
    }
    if (backlog) {
      backlogItems.set({ queue: "payout_sender" }, backlog.payouts.claims_paid);
      backlogAge.set({ queue: "payout_sender" }, backlog.payouts.oldest_paid_seconds ?? 0);
      backlogItems.set({ queue: "payout_confirmer" }, backlog.payouts.payouts_unfinished);
      backlogAge.set({ queue: "payout_confirmer" }, backlog.payouts.oldest_unfinished_seconds ?? 0);
    }
    if (report.payouts?.usdc_balance != null) {
      wallet.set({ asset: "usdc" }, Number(report.payouts.usdc_balance));
    }
    if (report.payouts?.eth_balance != null) {
      wallet.set({ asset: "eth" }, Number(report.payouts.eth_balance));
    }
    if (counts) {
      for (const status of CLAIM_STATUSES) claims.set({ status }, counts.claims[status]);
      for (const [event, count] of Object.entries(counts.payouts)) payouts.inc({ event }, count);
    }
  }

  return {
    httpRequests,
    httpDuration,
    contentType: registry.contentType,
    async render() {
      show(await snapshot());
      return Registry.merge([processMetrics(), registry]).metrics();
    },
  };
}

/** `read`'s promise, shared by every caller until `ttlMs` after it started. */
function sharedFor<T>(ttlMs: number, read: () => Promise<T>): () => Promise<T> {
  let cached: { startedAt: number; value: Promise<T> } | undefined;
  return () => {
    if (!cached || Date.now() - cached.startedAt > ttlMs) {
      cached = { startedAt: Date.now(), value: read() };
    }
    return cached.value;
  };
}
