import { formatEther } from "viem";
import type { z } from "zod";
import { formatUsdcFixed } from "../money.ts";
import type { healthResponse } from "../schemas/health.ts";
import type { HealthReport } from "./checkHealth.ts";

/** GET /api/health's answer: see `healthResponse`. Balances in USDC (six places) and ether. */
export function healthView(report: HealthReport): z.infer<typeof healthResponse> {
  const { payouts, backlog } = report;
  return {
    status: report.status,
    reasons: report.reasons,
    database: { ok: report.database.ok },
    chain: {
      ok: report.chain.ok,
      chain_id: report.chain.chainId,
      head_block: report.chain.headBlock,
    },
    indexer: {
      ok: report.indexer.ok,
      indexed_block: report.indexer.indexedBlock,
      lag_blocks: report.indexer.lagBlocks,
    },
    payouts: payouts && {
      ok: payouts.ok,
      wallet: payouts.wallet,
      usdc_balance: payouts.usdcBalance === null ? null : formatUsdcFixed(payouts.usdcBalance),
      eth_balance: payouts.ethBalance === null ? null : formatEther(payouts.ethBalance),
      claims_paid: payouts.claimsPaid,
      payouts_unfinished: payouts.payoutsUnfinished,
    },
    backlog: backlog && {
      ok: backlog.ok,
      matcher: backlog.matcher && {
        cursor_block: backlog.matcher.cursorBlock,
        waiting_transfers: backlog.matcher.waitingTransfers,
        lag_blocks: backlog.matcher.lagBlocks,
        oldest_waiting_seconds: backlog.matcher.oldestWaitingSeconds,
      },
      payouts: {
        claims_paid: backlog.payouts.claimsPaid,
        oldest_paid_seconds: backlog.payouts.oldestPaidSeconds,
        payouts_unfinished: backlog.payouts.payoutsUnfinished,
        oldest_unfinished_seconds: backlog.payouts.oldestUnfinishedSeconds,
      },
      max_age_seconds: backlog.maxAgeSeconds,
    },
    attention: report.attention,
    mail: mailView(report),
    amount_space: report.amountSpace && {
      ok: report.amountSpace.ok,
      held: report.amountSpace.held,
      size: report.amountSpace.size,
      fill_ratio: report.amountSpace.fillRatio,
      warn_ratio: report.amountSpace.warnRatio,
    },
    checked_at: report.checkedAt.toISOString(),
  };
}

function mailView({ mail }: HealthReport): z.infer<typeof healthResponse>["mail"] {
  if (!mail) return null;
  const { intake, outbox } = mail;
  return {
    ok: mail.ok,
    intake: intake && {
      transport: intake.transport,
      ok: intake.lastOkSeconds !== null && intake.lastOkSeconds <= mail.maxAgeSeconds.intake,
      last_ok_at: intake.lastOkAt?.toISOString() ?? null,
      last_ok_seconds: intake.lastOkSeconds,
      last_error: intake.lastError,
      last_error_at: intake.lastErrorAt?.toISOString() ?? null,
    },
    outbox: {
      sending: outbox.sending,
      pending: outbox.pending,
      oldest_pending_seconds: outbox.oldestPendingSeconds,
      failed: outbox.failed,
      failed_last_day: outbox.failedLastDay,
    },
    max_age_seconds: mail.maxAgeSeconds,
  };
}
