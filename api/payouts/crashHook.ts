import type { ServiceConfig } from "../config.ts";

export type CrashPoint = NonNullable<ServiceConfig["payouts"]["crashAt"]>;

/**
 * Crash tests only (`CRASH_AT`, test/integration/payoutsCrash.test.ts): the process kills
 * itself at the two moments where exactly-once is hardest to keep, right after the signing
 * transaction commits (signed, never sent) and right after the node took the transactions
 * (sent, nothing about it stored). SIGKILL rather than an exit: no finally blocks, no
 * shutdown hooks, no flushed state, exactly like a power cut or the OOM killer.
 */
export function crashIfConfigured(config: ServiceConfig, point: CrashPoint): void {
  if (config.payouts.crashAt === point) process.kill(process.pid, "SIGKILL");
}
