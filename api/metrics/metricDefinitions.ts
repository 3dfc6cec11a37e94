import { Counter, Gauge, type Registry } from "prom-client";
import { RequestMetrics } from "./requestMetrics.ts";

/** Why the SMTP intake refused a command or a session (pay_and_earn_smtp_refusals_total). */
export type SmtpRefusalReason =
  | "connections_per_ip"
  | "messages_per_ip"
  | "session_too_long"
  | "recipient"
  | "too_large"
  | "store_failed";

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
    help: "Work waiting: matcher (confirmed transfers), payout_sender (paid claims), payout_confirmer (unmined payouts), mail_inbound (inbound messages not acted on yet), mail_outbox (mails not sent yet).",
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
  const mailMessages = new Gauge({
    name: "pay_and_earn_mail_messages",
    help: "Inbound messages stored (the last MAIL_RETENTION_DAYS) by status and outcome: why they were refused (rejected, ignored: header_trick, unauthenticated, auth_timeout, too_late …) and why they wait (received: rate_limited for a reply budget, auth_timeout for another try of the sender check, none for the processor).",
    labelNames: ["status", "outcome"] as const,
    registers,
  });
  // Counted by this process as they happen (nothing of them is stored): sum across replicas.
  const smtpRefusals = new Counter({
    name: "pay_and_earn_smtp_refusals_total",
    help: "SMTP commands or sessions the intake refused, by reason: connections_per_ip (421), messages_per_ip (450), session_too_long (421), recipient (550, 452), too_large (552 after DATA), store_failed (451). Per replica.",
    labelNames: ["reason"] as const,
    registers,
  });
  return {
    mails,
    mailMessages,
    smtpRefusals,
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
