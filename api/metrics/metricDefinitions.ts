import { Counter, Gauge, type Registry } from "prom-client";
import { RequestMetrics } from "./requestMetrics.ts";

/**
 * Every metric the service exposes, declared once: names, help texts and labels. The HTTP
 * middleware records into `requests` (http_requests_total and http_request_duration_seconds,
 * requestMetrics.ts); the rest are read from the database and the RPC at scrape time
 * (serviceMetrics.ts), the same numbers on every replica.
 */
export function declareMetrics(registry: Registry) {
  const registers = [registry];
  const requests = new RequestMetrics();
  requests.registerIn(registry);

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
    help: "Work waiting: matcher (confirmed transfers), payout_sender (paid claims), payout_confirmer (unmined payouts), mail_outbox (mails not sent yet).",
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
  const attention = new Gauge({
    name: "pay_and_earn_needing_attention",
    help: "Things that wait for a person, by health reason: payouts whose nonce was taken, foreign USDC sent from the payout wallet, lost x402 settlements.",
    labelNames: ["reason"] as const,
    registers,
  });
  const amountSpace = new Gauge({
    name: "pay_and_earn_amount_space_fill_ratio",
    help: "Variant A: the share of the unique amounts held now (0 to 1); at 1 new claims open without one.",
    registers,
  });
  const mails = new Counter({
    name: "pay_and_earn_mails_total",
    help: "Mail by event: received (inbound, stored), ignored (automatic, loops), rejected (unauthenticated, rate limited …), replied (answers sent), sent (every mail sent, receipts included), failed (given up).",
    labelNames: ["event"] as const,
    registers,
  });
  return {
    mails,
    requests,
    up,
    health,
    claims,
    payouts,
    lag,
    backlogItems,
    backlogAge,
    wallet,
    attention,
    amountSpace,
  };
}

export type DeclaredMetrics = ReturnType<typeof declareMetrics>;
