import type { CRASH_POINTS, ServiceConfig } from "./config/serviceConfig.ts";

export type CrashPoint = (typeof CRASH_POINTS)[number];

/**
 * Crash tests only (`CRASH_AT`): the process kills itself at the moments where exactly-once
 * is hardest to keep. Payouts: right after the signing transaction commits (signed, never
 * sent), right after the node took the transactions (sent, nothing about it stored), and right
 * after a round is stored while the one before it is on its way to the node. x402:
 * right after (payer, nonce) is recorded (nothing settled) and right after the settlement
 * (paid on chain, nothing about it stored); settled with its payout in one transaction, right
 * after the payout sender stored that transaction and right after it sent it. Mail: right after a message is stored (not acted on),
 * right after a mail claim is created (its message not marked), right before an outbox mail is
 * handed to the mail server. SIGKILL rather than an exit: no finally blocks,
 * no shutdown hooks, no flushed state, exactly like a power cut or the OOM killer.
 */
export function crashIfConfigured(config: Pick<ServiceConfig, "crashAt">, point: CrashPoint): void {
  if (config.crashAt === point) process.kill(process.pid, "SIGKILL");
}
