import { collectDefaultMetrics, Registry } from "prom-client";
import { formatEther } from "viem";
import type { HealthReport } from "../health/checkHealth.ts";
import { type MailCounts, readMailCounts } from "../mailbox/mailStatus.ts";
import { formatUsdcFixed } from "../money.ts";
import { sharedFor } from "../readCache.ts";
import { CLAIM_STATUSES } from "../schemas/claimStatus.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { withTimeout } from "../withTimeout.ts";
import {
  type DeclaredMetrics,
  declareMetrics,
  type SmtpRefusalReason,
} from "./metricDefinitions.ts";
import { readStatusCounts, type StatusCounts } from "./readStatusCounts.ts";
import type { RequestMetrics } from "./requestMetrics.ts";

const SNAPSHOT_TIMEOUT_MS = 2_000;

/**
 * What the metrics are read from: the service's dependencies and its health check, which the
 * core shares for READ_CACHE_MS between GET /metrics and GET /api/health.
 */
export interface MetricsDeps extends ServiceDeps {
  core: { checkHealth(): Promise<HealthReport> };
}

export interface ServiceMetrics {
  /** Every HTTP request, counted and timed by the HTTP layer. */
  requests: RequestMetrics;
  /** What the SMTP intake refused, counted as it happens (api/mail/smtpIntake.ts). */
  countSmtpRefusal(reason: SmtpRefusalReason): void;
  contentType: string;
  /** The exposition text. Never throws for a dependency that is down: its values are absent. */
  render(): Promise<string>;
}

const metricsByService = new WeakMap<MetricsDeps, ServiceMetrics>();

/**
 * The metrics of one service (one `deps`): the HTTP middleware records into them and
 * GET /metrics renders them, so both must get the same object for the same service.
 */
export function serviceMetrics(deps: MetricsDeps): ServiceMetrics {
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
  mailCounts?: MailCounts | null;
}

function createServiceMetrics(deps: MetricsDeps): ServiceMetrics {
  const registry = new Registry();
  const metrics = declareMetrics(registry);

  // A scrape reads the database and the RPC at most once per READ_CACHE_MS; scrapes in between
  // (and health checks: the report is the core's shared one) share it.
  const snapshot = sharedFor(deps.config.readCacheMs, async (): Promise<Snapshot> => {
    const mailCountsRead = withTimeout(
      readMailCounts(deps.sql),
      SNAPSHOT_TIMEOUT_MS,
      "the mail counts",
    ).catch((error: unknown) => {
      deps.logger.warn({ err: error }, "metrics: mail counts unreadable");
      return null;
    });
    const [report, counts] = await Promise.all([
      deps.core.checkHealth(),
      withTimeout(readStatusCounts(deps.sql), SNAPSHOT_TIMEOUT_MS, "the status counts").catch(
        (error: unknown) => {
          deps.logger.warn({ err: error }, "metrics: status counts unreadable");
          return null;
        },
      ),
    ]);
    const mailCounts = await mailCountsRead;
    return { health: report, counts, mailCounts };
  });

  return {
    requests: metrics.requests,
    countSmtpRefusal: (reason) => metrics.smtpRefusals.inc({ reason }),
    contentType: registry.contentType,
    async render() {
      show(metrics, await snapshot());
      return Registry.merge([processMetrics(), registry]).metrics();
    },
  };
}

/** Sets the scrape-time metrics from a snapshot; what could not be read is left out. */
function show(metrics: DeclaredMetrics, { health: report, counts, mailCounts }: Snapshot): void {
  const { up, health, claims, payouts, lag, backlogItems, backlogAge, wallet, attention } = metrics;
  const { amountSpace } = metrics;
  for (const gauge of [
    up,
    health,
    claims,
    lag,
    backlogItems,
    backlogAge,
    wallet,
    attention,
    amountSpace,
  ]) {
    gauge.reset();
  }
  if (report.amountSpace) amountSpace.set(report.amountSpace.fillRatio);
  for (const [reason, count] of Object.entries(report.attention ?? {})) {
    attention.set({ reason }, count);
  }
  payouts.reset();
  up.set({ dependency: "database" }, report.database.ok ? 1 : 0);
  up.set({ dependency: "rpc" }, report.chain.ok ? 1 : 0);
  for (const status of ["ok", "degraded", "down"]) {
    health.set({ status }, report.status === status ? 1 : 0);
  }
  if (report.indexer.lagBlocks !== null) {
    lag.set({ component: "indexer" }, report.indexer.lagBlocks);
  }
  const backlog = report.backlog;
  if (backlog?.matcher) {
    lag.set({ component: "matcher" }, backlog.matcher.lagBlocks);
    backlogItems.set({ queue: "matcher" }, backlog.matcher.waitingTransfers);
    backlogAge.set({ queue: "matcher" }, backlog.matcher.oldestWaitingSeconds ?? 0);
  }
  if (backlog) {
    backlogItems.set({ queue: "payout_sender" }, backlog.payouts.claimsPaid);
    backlogAge.set({ queue: "payout_sender" }, backlog.payouts.oldestPaidSeconds ?? 0);
    backlogItems.set({ queue: "payout_confirmer" }, backlog.payouts.payoutsUnfinished);
    backlogAge.set({ queue: "payout_confirmer" }, backlog.payouts.oldestUnfinishedSeconds ?? 0);
  }
  if (report.payouts?.usdcBalance != null) {
    wallet.set({ asset: "usdc" }, Number(formatUsdcFixed(report.payouts.usdcBalance)));
  }
  if (report.payouts?.ethBalance != null) {
    wallet.set({ asset: "eth" }, Number(formatEther(report.payouts.ethBalance)));
  }
  if (counts) {
    for (const status of CLAIM_STATUSES) claims.set({ status }, counts.claims[status]);
    for (const [event, count] of Object.entries(counts.payouts)) payouts.inc({ event }, count);
  }
  showMail(metrics, report, mailCounts ?? null);
}

/** The mail counts and the outbox's backlog; left out when unreadable. */
function showMail(metrics: DeclaredMetrics, report: HealthReport, counts: MailCounts | null) {
  metrics.mails.reset();
  metrics.mailMessages.reset();
  if (counts) {
    for (const event of ["received", "ignored", "rejected", "replied", "sent", "failed"] as const) {
      metrics.mails.inc({ event }, counts[event]);
    }
    for (const { status, outcome, count } of counts.inboundByOutcome) {
      metrics.mailMessages.set({ status, outcome: outcome ?? "none" }, count);
    }
    metrics.backlogItems.set({ queue: "mail_inbound" }, counts.inboundWaiting);
    metrics.backlogAge.set({ queue: "mail_inbound" }, counts.oldestInboundWaitingSeconds ?? 0);
  }
  if (report.mail) {
    metrics.backlogItems.set({ queue: "mail_outbox" }, report.mail.outbox.pending);
    metrics.backlogAge.set({ queue: "mail_outbox" }, report.mail.outbox.oldestPendingSeconds ?? 0);
  }
}
