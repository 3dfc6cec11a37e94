import type { PrivateKeyAccount, PublicClient } from "viem";
import { crashIfConfigured } from "../crashHook.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { phaseTimer } from "../workers/phaseTimer.ts";
import type { Worker, WorkerLock } from "../workers/runWorker.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import type { SettleAndPayCode } from "../x402/settleAndPayCode.ts";
import { logBroadcast, recordOutcomes, summarize } from "./broadcastPayouts.ts";
import { fillNonceGaps, type GapState } from "./fillNonceGaps.ts";
import { sendRawTransactions } from "./payoutRpc.ts";
import { reconcilePayouts, sendSignedPayouts } from "./reconcilePayouts.ts";
import { type PayoutHold, signCoveredPayouts } from "./signCoveredPayouts.ts";
import type { PayoutTx } from "./signNewPayouts.ts";

const MAX_RETRY_DELAY_MS = 30_000;

/** Rounds one tick signs and broadcasts back to back before the loop checks its lock again. */
const PIPELINED_ROUNDS = 4;

const ALWAYS_HELD: WorkerLock = { held: () => true };

interface SignedRound {
  signed: PayoutTx[];
  timing: ReturnType<typeof phaseTimer>;
}

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
  clients: { reads: PublicClient; broadcasts: PublicClient },
  account: PrivateKeyAccount,
  settleAndPay?: SettleAndPayCode,
): Worker {
  const { sql, config } = deps;
  const rpc = clients.reads;
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

  /** Signs and stores the next round of new payouts; null when none is signed (held or none due). */
  async function signRound(): Promise<SignedRound | null> {
    const timing = phaseTimer();
    const round = await signCoveredPayouts({ ...deps, settleAndPay }, rpc, account, timing);
    if ("held" in round) {
      hold(round.held);
      return null;
    }
    if (round.signed.length === 0) return null;
    hold(null);
    logger.info(
      { payouts: round.signed.length, firstNonce: round.signed[0]?.nonce.toString() },
      "signed and stored payouts",
    );
    crashIfConfigured(config, "after_payouts_signed");
    if (round.signed.some((payout) => payout.settlesX402)) {
      crashIfConfigured(config, "after_settle_and_pay_signed");
    }
    return { signed: round.signed, timing };
  }

  /** Broadcasts a stored round in nonce order and records each outcome; true when all went out. */
  async function broadcastRound({ signed, timing }: SignedRound): Promise<boolean> {
    const broadcastStart = phaseTimer();
    const outcomes = await sendRawTransactions(
      clients.broadcasts,
      signed.map((payout) => payout.rawTx),
    );
    broadcastStart.lap("broadcast");
    crashIfConfigured(config, "after_payouts_broadcast");
    if (signed.some((payout) => payout.settlesX402)) {
      crashIfConfigured(config, "after_settle_and_pay_broadcast");
    }
    await recordOutcomes(sql, signed, outcomes);
    await wakeWorker(sql, WAKE_CHANNELS.payoutConfirmer);
    broadcastStart.lap("record");
    const summary = summarize(outcomes);
    logBroadcast(logger, "broadcast new payouts", signed, outcomes, summary, {
      ms: { ...timing.laps, ...broadcastStart.laps },
    });
    return summary.broadcast === signed.length;
  }

  function crashedAfterNext(round: SignedRound | null): SignedRound | null {
    if (round) crashIfConfigured(config, "after_next_round_signed");
    return round;
  }

  /**
   * Up to PIPELINED_ROUNDS rounds of new payouts, each signed and stored while the one before is
   * broadcast (the node's acceptance of a round and the database's storing of the next take about
   * as long, and neither needs the other). Broadcasts stay one after another, in nonce order.
   * When a round is not wholly accepted, the round already signed behind it stays `signed`, as
   * after a crash, and the next tick sends both in nonce order before anything newer is signed.
   */
  async function broadcastNew(lock: WorkerLock): Promise<boolean> {
    let round = await signRound();
    for (let rounds = 1; round; rounds += 1) {
      const full = round.signed.length === config.payouts.batchSize;
      // No new round once the lock is gone: a standby may be signing by now.
      const signNext = full && rounds < PIPELINED_ROUNDS && lock.held();
      const [sent, next] = await Promise.allSettled([
        broadcastRound(round),
        signNext ? signRound().then(crashedAfterNext) : Promise.resolve(null),
      ]);
      if (sent.status === "rejected") {
        if (next.status === "rejected") {
          logger.error({ err: next.reason }, "signing the next round failed too");
        }
        throw sent.reason;
      }
      if (next.status === "rejected") throw next.reason;
      if (!sent.value) return false;
      // Full and not looked further: more may wait, the next tick goes on at once.
      if (!signNext) return full;
      round = next.value;
    }
    return false;
  }

  return {
    name: "payout-sender",
    lockKey: LOCK_KEYS.payoutSender,
    intervalMs: config.payouts.intervalMs,
    wakeChannels: [WAKE_CHANNELS.payoutSender],
    async tick(lock = ALWAYS_HELD) {
      if (!reconciled) {
        await reconcilePayouts({ sql, logger }, rpc, account);
        reconciled = true;
      }
      await fillNonceGaps({ sql, config, logger }, rpc, account, gaps);
      if (Date.now() < retryAt) return false;
      if (!(await sendSignedPayouts({ sql, logger }, rpc, account, config.payouts.batchSize * 4))) {
        failures += 1;
        retryAt = Date.now() + Math.min(MAX_RETRY_DELAY_MS, 500 * 2 ** (failures - 1));
        return false;
      }
      failures = 0;
      return broadcastNew(lock);
    },
  };
}
