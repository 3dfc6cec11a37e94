import type { PublicClient } from "viem";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import { readAmountSpaceFill } from "../claims/reserveAmount.ts";
import { type Database, pingDatabase, type Sql } from "../db/connect.ts";
import type { MailTransport } from "../mailbox/inboundMessages.ts";
import {
  type IntakeStatus,
  type OutboxStatus,
  readIntakeStatus,
  readOutboxStatus,
} from "../mailbox/mailStatus.ts";
import { type PayoutFunding, readPayoutFunding } from "../payouts/payoutFunding.ts";
import {
  ATTENTION_REASONS,
  DOWN_HEALTH_REASONS,
  type HealthReason,
} from "../reasons/reasonCatalog.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { withTimeout } from "../withTimeout.ts";
import type { SettleAndPayCode, SettleAndPayCodeState } from "../x402/settleAndPayCode.ts";
import { type Attention, readAttention } from "./readAttention.ts";
import {
  type MatcherBacklog,
  type PayoutBacklog,
  readMatcherBacklog,
  readPayoutBacklog,
} from "./readBacklog.ts";

export type HealthStatus = "ok" | "degraded" | "down";
export type { HealthReason };

/** What the service found about itself and its dependencies (GET /api/health, /metrics). */
export interface HealthReport {
  status: HealthStatus;
  reasons: HealthReason[];
  database: { ok: boolean };
  chain: { ok: boolean; chainId: number; headBlock: number | null };
  indexer: { ok: boolean; indexedBlock: number | null; lagBlocks: number | null };
  /** The payout wallet and the backlog; null where the service does not check it. */
  payouts: PayoutsHealth | null;
  /** Work waiting for the matcher and the payout loops; null where unchecked or unreadable. */
  backlog: BacklogHealth | null;
  /** What waits for a person, by health reason; null when the database cannot say. */
  attention: Attention | null;
  /** The mail intake and the outbox; null where unchecked or unreadable. */
  mail: MailHealth | null;
  /** Variant A's unique amounts held now; null in variant B or when unreadable. */
  amountSpace: AmountSpaceHealth | null;
  checkedAt: Date;
}

export interface AmountSpaceHealth {
  ok: boolean;
  held: number;
  size: number;
  fillRatio: number;
  warnRatio: number;
}

export interface MailHealth {
  ok: boolean;
  /** The intake's last sign of life; null when MAIL_INTAKE=off. */
  intake: IntakeStatus | null;
  outbox: OutboxStatus & { sending: boolean };
  maxAgeSeconds: { intake: number; outbox: number };
}

export interface MailThresholds {
  intake: MailTransport | null;
  /** SMTP_URL is set: the outbox is being sent. */
  sending: boolean;
  intakeMaxAgeSeconds: number;
  outboxMaxAgeSeconds: number;
}

export interface PayoutsHealth {
  /** The wallet can pay the next payout (USDC and gas, beyond what it already owes). */
  ok: boolean;
  wallet: string | null;
  /** Atomic USDC and wei; null when unreadable. */
  usdcBalance: bigint | null;
  ethBalance: bigint | null;
  /** Claims waiting for their payout to be signed. */
  claimsPaid: number | null;
  /** Payouts signed or broadcast whose outcome is not stored yet. */
  payoutsUnfinished: number | null;
}

/** Counts and ages (whole seconds; null when nothing waits). */
export interface BacklogHealth {
  ok: boolean;
  /** Null until the indexer is ready. */
  matcher: MatcherBacklog | null;
  payouts: PayoutBacklog;
  /** The ages beyond which the report is degraded. */
  maxAgeSeconds: { matcher: number; payouts: number };
}

export interface BacklogThresholds {
  /** Blocks on top of a transfer before the matcher takes it. */
  confirmations: number;
  matcherMaxAgeSeconds: number;
  payoutMaxAgeSeconds: number;
}

export interface HealthDependencies {
  sql: Database;
  chain: PublicClient;
  chainId: number;
  maxIndexerLagBlocks: number;
  /** The payout wallet's funding (payouts/payoutFunding.ts); without it, `payouts` is null. */
  payoutFunding?: () => Promise<PayoutFunding>;
  /** Without it, `backlog` is null. */
  backlog?: BacklogThresholds;
  /** Without it, `mail` is null. */
  mail?: MailThresholds;
  /** Variant A's amount space; without it, `amountSpace` is null. */
  amountSpace?: { size: number; warnRatio: number };
  /** What SETTLE_AND_PAY_ADDRESS holds (x402/settleAndPayCode.ts); absent when not configured. */
  settleAndPayCode?: () => Promise<SettleAndPayCodeState>;
  timeoutMs?: number;
}

/** Everything the service checks, from its configuration. */
export function serviceHealthDependencies(
  deps: ServiceDeps,
  settleAndPay?: SettleAndPayCode,
): HealthDependencies {
  const { config } = deps;
  return {
    ...(settleAndPay && config.x402.settleAndPay
      ? { settleAndPayCode: () => settleAndPay.state() }
      : {}),
    sql: deps.sql,
    chain: deps.chain,
    chainId: config.chain.chainId,
    maxIndexerLagBlocks: config.indexer.maxLagBlocks,
    payoutFunding: () => readPayoutFunding(deps),
    backlog: {
      confirmations: config.chain.confirmations,
      matcherMaxAgeSeconds: config.health.matcherBacklogSeconds,
      payoutMaxAgeSeconds: config.health.payoutBacklogSeconds,
    },
    mail: {
      intake: config.mail.intake === "off" ? null : config.mail.intake,
      sending: config.mail.smtpUrl !== undefined,
      intakeMaxAgeSeconds: config.mail.health.intakeMaxAgeSeconds,
      outboxMaxAgeSeconds: config.mail.health.outboxMaxAgeSeconds,
    },
    ...(config.claims.variant === "A"
      ? {
          amountSpace: {
            size: config.claims.amountSpaceSize,
            warnRatio: config.claims.amountSpaceWarnRatio,
          },
        }
      : {}),
  };
}

/** Never throws: every failed check becomes a reason in the report. */
export async function checkHealth(deps: HealthDependencies): Promise<HealthReport> {
  const timeoutMs = deps.timeoutMs ?? 2_000;
  const [database, rpc, indexed, funding, settleAndPay] = await Promise.allSettled([
    withTimeout(pingDatabase(deps.sql), timeoutMs, "the database check"),
    withTimeout(
      Promise.all([deps.chain.getChainId(), deps.chain.getBlockNumber()]),
      timeoutMs,
      "the RPC check",
    ),
    withTimeout(readIndexedBlock(deps.sql, deps.chainId), timeoutMs, "the indexer check"),
    deps.payoutFunding
      ? withTimeout(deps.payoutFunding(), timeoutMs, "the payout wallet check")
      : Promise.resolve(null),
    deps.settleAndPayCode
      ? withTimeout(deps.settleAndPayCode(), timeoutMs, "the SettleAndPay check")
      : Promise.resolve("not_configured" as const),
  ]);

  const reasons: HealthReason[] = [];
  if (database.status === "rejected") reasons.push("database_unreachable");

  let headBlock: number | null = null;
  if (rpc.status === "rejected") {
    reasons.push("rpc_unreachable");
  } else if (rpc.value[0] !== deps.chainId) {
    reasons.push("rpc_wrong_chain");
  } else {
    headBlock = Number(rpc.value[1]);
  }

  const indexedBlock =
    indexed.status === "fulfilled" && indexed.value !== null ? Number(indexed.value) : null;
  const lagBlocks =
    indexedBlock !== null && headBlock !== null ? Math.max(0, headBlock - indexedBlock) : null;
  if (database.status === "fulfilled" && indexedBlock === null) reasons.push("indexer_not_ready");
  if (lagBlocks !== null && lagBlocks > deps.maxIndexerLagBlocks) reasons.push("indexer_behind");

  // Unreadable: the RPC's own reasons say why, if it stays so.
  if (settleAndPay.status === "fulfilled" && settleAndPay.value === "wrong_code") {
    reasons.push("settle_and_pay_not_deployed");
  }

  let payouts: PayoutsHealth | null = null;
  if (funding.status === "fulfilled" && funding.value) {
    const wallet = funding.value;
    if (wallet.coveredByUsdc < 1) reasons.push("payout_wallet_low_usdc");
    if (wallet.coveredByEth < 1) reasons.push("payout_wallet_low_eth");
    payouts = {
      ok: wallet.coveredByUsdc >= 1 && wallet.coveredByEth >= 1,
      wallet: wallet.wallet,
      usdcBalance: wallet.usdcBalance,
      ethBalance: wallet.ethBalance,
      claimsPaid: wallet.paidClaims,
      payoutsUnfinished: wallet.unfinishedPayouts,
    };
  } else if (funding.status === "rejected") {
    // Unreadable: the database or RPC reasons above already say why.
    payouts = {
      ok: false,
      wallet: null,
      usdcBalance: null,
      ethBalance: null,
      claimsPaid: null,
      payoutsUnfinished: null,
    };
  }

  let backlog: BacklogHealth | null = null;
  if (deps.backlog && database.status === "fulfilled") {
    // Transfers count for the matcher once indexed and confirmed; without the RPC's head the
    // indexed block stands in for it.
    const confirmedThrough =
      indexedBlock === null
        ? null
        : BigInt(Math.min(indexedBlock, headBlock ?? indexedBlock) - deps.backlog.confirmations);
    backlog = await readBacklog(deps.sql, confirmedThrough, deps.backlog, timeoutMs);
    if (backlog) reasons.push(...backlogReasons(backlog, deps.backlog));
  }

  // What waits for a person is read past the attention check's marks, the whole history until
  // it has passed it (docs/operating.md#attention-checked-through): a check that cannot finish
  // must say so, not drop every count with it (a payout whose nonce was taken among them).
  let attentionUnreadable = false;
  const attention =
    database.status === "fulfilled"
      ? await withTimeout(
          readAttention(
            deps.sql,
            { chainId: deps.chainId, confirmations: deps.backlog?.confirmations ?? 0 },
            { timeoutMs },
          ),
          timeoutMs,
          "the attention check",
        ).catch(() => {
          attentionUnreadable = true;
          return null;
        })
      : null;
  for (const reason of ATTENTION_REASONS) {
    if ((attention?.[reason] ?? 0) > 0) reasons.push(reason);
  }
  if (attentionUnreadable) reasons.push("attention_unreadable");
  let amountSpace: AmountSpaceHealth | null = null;
  if (deps.amountSpace && database.status === "fulfilled") {
    const { size, warnRatio } = deps.amountSpace;
    const fill = await withTimeout(
      readAmountSpaceFill(deps.sql, size),
      timeoutMs,
      "the amount space check",
    ).catch(() => null);
    if (fill) {
      amountSpace = {
        ok: fill.ratio < warnRatio,
        held: fill.held,
        size,
        fillRatio: fill.ratio,
        warnRatio,
      };
      if (!amountSpace.ok) reasons.push("amount_space_scarce");
    }
  }
  let mail: MailHealth | null = null;
  if (deps.mail && database.status === "fulfilled") {
    mail = await readMailHealth(deps.sql, deps.mail, timeoutMs);
    if (mail) reasons.push(...mailReasons(mail));
  }

  const status: HealthStatus = reasons.some((reason) => DOWN_HEALTH_REASONS.has(reason))
    ? "down"
    : reasons.length > 0
      ? "degraded"
      : "ok";
  return {
    status,
    reasons,
    database: { ok: database.status === "fulfilled" },
    chain: { ok: headBlock !== null, chainId: deps.chainId, headBlock },
    indexer: {
      ok: indexedBlock !== null && !reasons.includes("indexer_behind"),
      indexedBlock,
      lagBlocks,
    },
    payouts,
    backlog,
    attention,
    mail,
    amountSpace,
    checkedAt: new Date(),
  };
}

/** Null when it cannot be read in time (the database checks above say why). */
async function readMailHealth(
  sql: Sql,
  thresholds: MailThresholds,
  timeoutMs: number,
): Promise<MailHealth | null> {
  const [intake, outbox] = await Promise.allSettled([
    thresholds.intake === null
      ? Promise.resolve(null)
      : withTimeout(readIntakeStatus(sql, thresholds.intake), timeoutMs, "the mail intake"),
    withTimeout(readOutboxStatus(sql), timeoutMs, "the mail outbox"),
  ]);
  if (intake.status === "rejected" || outbox.status === "rejected") return null;
  const report: MailHealth = {
    ok: true,
    intake: intake.value,
    outbox: { ...outbox.value, sending: thresholds.sending },
    maxAgeSeconds: {
      intake: thresholds.intakeMaxAgeSeconds,
      outbox: thresholds.outboxMaxAgeSeconds,
    },
  };
  report.ok = mailReasons(report).length === 0;
  return report;
}

function mailReasons(mail: MailHealth): HealthReason[] {
  const reasons: HealthReason[] = [];
  if (
    mail.intake &&
    (mail.intake.lastOkSeconds === null || mail.intake.lastOkSeconds > mail.maxAgeSeconds.intake)
  ) {
    reasons.push("mail_intake_down");
  }
  const oldest = mail.outbox.oldestPendingSeconds;
  if (oldest !== null && oldest > mail.maxAgeSeconds.outbox) reasons.push("mail_outbox_behind");
  if (mail.outbox.failedLastDay > 0) reasons.push("mail_outbox_failed");
  return reasons;
}

/** Null when the backlog cannot be read in time (the database checks above say why). */
async function readBacklog(
  sql: Sql,
  confirmedThrough: bigint | null,
  thresholds: BacklogThresholds,
  timeoutMs: number,
): Promise<BacklogHealth | null> {
  const [matcher, payouts] = await Promise.allSettled([
    confirmedThrough === null
      ? Promise.resolve(null)
      : withTimeout(readMatcherBacklog(sql, confirmedThrough), timeoutMs, "the matcher backlog"),
    withTimeout(readPayoutBacklog(sql), timeoutMs, "the payout backlog"),
  ]);
  if (payouts.status === "rejected") return null;
  const report: BacklogHealth = {
    ok: true,
    matcher: matcher.status === "fulfilled" ? matcher.value : null,
    payouts: payouts.value,
    maxAgeSeconds: {
      matcher: thresholds.matcherMaxAgeSeconds,
      payouts: thresholds.payoutMaxAgeSeconds,
    },
  };
  report.ok = backlogReasons(report, thresholds).length === 0;
  return report;
}

/** How long health says the RPC cut logs short, after the last time it did. */
const LOGS_SHORT_SHOWN_SECONDS = 3600;

function backlogReasons(backlog: BacklogHealth, thresholds: BacklogThresholds): HealthReason[] {
  const olderThan = (age: number | null | undefined, max: number) => age != null && age > max;
  const reasons: HealthReason[] = [];
  if (olderThan(backlog.matcher?.oldestWaitingSeconds, thresholds.matcherMaxAgeSeconds)) {
    reasons.push("matcher_behind");
  }
  const logsShort = backlog.matcher?.logsShortSecondsAgo;
  if (logsShort != null && logsShort < LOGS_SHORT_SHOWN_SECONDS)
    reasons.push("rpc_logs_incomplete");
  if (olderThan(backlog.payouts.oldestPaidSeconds, thresholds.payoutMaxAgeSeconds)) {
    reasons.push("payouts_waiting");
  }
  if (olderThan(backlog.payouts.oldestUnfinishedSeconds, thresholds.payoutMaxAgeSeconds)) {
    reasons.push("payouts_unconfirmed");
  }
  return reasons;
}
