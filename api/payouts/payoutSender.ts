import type { PrivateKeyAccount, PublicClient } from "viem";
import { crashIfConfigured } from "../crashHook.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { phaseTimer } from "../workers/phaseTimer.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { logBroadcast, recordOutcomes, summarize } from "./broadcastPayouts.ts";
import { fillNonceGaps, type GapState } from "./fillNonceGaps.ts";
import { sendRawTransactions } from "./payoutRpc.ts";
import { reconcilePayouts, sendSignedPayouts } from "./reconcilePayouts.ts";
import { type PayoutHold, signCoveredPayouts } from "./signCoveredPayouts.ts";

const MAX_RETRY_DELAY_MS = 30_000;

/**
 * The sender: the only place new payout nonces are taken. Each round, in this order:
 * 1. once after taking the lock, reconcile (reconcilePayouts.ts); every round, fill nonces
 *    another sender left empty below our payouts (fillNonceGaps.ts);
 * 2. payouts still `signed` go out first; while any fails, nothing newer is signed and the
 *    round retries later with backoff;
 * 3. `paid` claims, as many as the wallet covers, are signed and stored in one transaction
 *    (signCoveredPayouts.ts), then broadcast.
 */
export function createPayoutSender(
  deps: ServiceDeps,
  rpc: PublicClient,
  account: PrivateKeyAccount,
): Worker {
  const { sql, config } = deps;
  const logger = deps.logger.child({ worker: "payout-sender" });
  let reconciled = false;
  let failures = 0;
  let retryAt = 0;
  let lastHold: string | null = null;
  const gaps: GapState = new Map();

  /** Logs why no new payout is signed, once per change of reason, not every round. */
  function hold(held: PayoutHold | null): void {
    const reason = held?.reason ?? null;
    if (reason === lastHold) return;
    if (held) logger.warn(held.fields, held.reason);
    else if (lastHold) logger.info("payouts resume");
    lastHold = reason;
  }

  async function broadcastNew(timing: ReturnType<typeof phaseTimer>): Promise<boolean> {
    const round = await signCoveredPayouts(deps, rpc, account, timing);
    if ("held" in round) {
      hold(round.held);
      return false;
    }
    const signed = round.signed;
    if (signed.length === 0) return false;
    hold(null);
    logger.info(
      { payouts: signed.length, firstNonce: signed[0]?.nonce.toString() },
      "signed and stored payouts",
    );
    crashIfConfigured(config, "after_payouts_signed");
    const outcomes = await sendRawTransactions(
      rpc,
      signed.map((payout) => payout.rawTx),
    );
    timing.lap("broadcast");
    crashIfConfigured(config, "after_payouts_broadcast");
    await recordOutcomes(sql, signed, outcomes);
    await wakeWorker(sql, WAKE_CHANNELS.payoutConfirmer);
    timing.lap("record");
    logBroadcast(logger, "broadcast new payouts", signed, outcomes, summarize(outcomes), {
      ms: timing.laps,
    });
    return signed.length === config.payouts.batchSize;
  }

  return {
    name: "payout-sender",
    lockKey: LOCK_KEYS.payoutSender,
    intervalMs: config.payouts.intervalMs,
    wakeChannel: WAKE_CHANNELS.payoutSender,
    async tick() {
      const timing = phaseTimer();
      if (!reconciled) {
        await reconcilePayouts({ sql, logger }, rpc, account);
        reconciled = true;
      }
      await fillNonceGaps({ sql, config, logger }, rpc, account, gaps);
      timing.lap("gaps");
      if (Date.now() < retryAt) return false;
      if (!(await sendSignedPayouts({ sql, logger }, rpc, account, config.payouts.batchSize * 4))) {
        failures += 1;
        retryAt = Date.now() + Math.min(MAX_RETRY_DELAY_MS, 500 * 2 ** (failures - 1));
        return false;
      }
      failures = 0;
      timing.lap("resend");
      return broadcastNew(timing);
    },
  };
}
