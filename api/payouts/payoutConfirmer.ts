import type { Hex, PrivateKeyAccount, PublicClient } from "viem";
import { networkId } from "../chain/networkId.ts";
import type { ReceiptIssuer } from "../receipts/issueReceipt.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { confirmPayouts } from "./confirmPayouts.ts";
import { markNonceTaken } from "./payoutRecords.ts";
import { hasUnfinishedPayouts } from "./readPayouts.ts";
import { reviveDroppedPayouts } from "./reviveDroppedPayouts.ts";
import { type UnstickState, unstickPayouts } from "./unstickPayouts.ts";
import { newWatchState, watchMinedPayouts } from "./watchMinedPayouts.ts";

const WATCH_INTERVAL_MS = 1_000;

/**
 * The confirmer: follows payouts after they are signed. Each round reads the wallet's mined
 * nonce, stores the outcome of payouts below it as soon as they are mined (confirmPayouts),
 * re-broadcasts or replaces payouts at or above it (unstickPayouts), and watches mined payouts
 * until they are final, sending again any a reorg took away (watchMinedPayouts), final ones
 * included (reviveDroppedPayouts). It never takes a new nonce: replacements reuse the payout's
 * own.
 */
export function createPayoutConfirmer(
  deps: ServiceDeps,
  rpc: PublicClient,
  account: PrivateKeyAccount,
  issuer: ReceiptIssuer,
): Worker {
  const { sql, config } = deps;
  const logger = deps.logger.child({ worker: "payout-confirmer" });
  const unstick: UnstickState = { atCap: new Set() };
  const unresolvedSince = new Map<string, number>();
  /** Payouts the last round found gone from the chain: revived only if this one agrees. */
  const droppedSuspects = new Set<Hex>();
  const watchState = newWatchState();
  let watchedAt = 0;
  const readLatestNonce = async () =>
    BigInt(await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }));

  /**
   * A payout whose nonce a transaction that is none of its attempts used, seen so for the
   * grace period: it can never be mined. It needs a person (health, metrics, and the operator
   * command that re-issues it once); nothing here signs it again.
   */
  async function markNoncesTaken(unresolved: { claimId: string; nonce: bigint }[]) {
    const now = Date.now();
    const current = new Set(unresolved.map((payout) => payout.claimId));
    for (const claimId of unresolvedSince.keys()) {
      if (!current.has(claimId)) unresolvedSince.delete(claimId);
    }
    for (const payout of unresolved) {
      const since = unresolvedSince.get(payout.claimId) ?? now;
      unresolvedSince.set(payout.claimId, since);
      if (now - since < config.payouts.foreignNonceGraceMs) continue;
      if (await markNonceTaken(sql, payout.nonce)) {
        logger.error(
          { claimId: payout.claimId, nonce: payout.nonce.toString(), wallet: account.address },
          "a foreign transaction used this payout's nonce; its claim waits for a person (pay-and-earn reissue-payout, docs/operating.md#reissuing-a-payout)",
        );
      }
    }
  }

  return {
    name: "payout-confirmer",
    lockKey: LOCK_KEYS.payoutConfirmer,
    intervalMs: config.payouts.intervalMs,
    wakeChannels: [WAKE_CHANNELS.payoutConfirmer],
    async tick() {
      const unfinished = await hasUnfinishedPayouts(sql);
      // Mined payouts are looked at once a second until final: a reorg is rare, receipts are not free.
      let watch = { resent: 0, changed: 0, finalized: 0 };
      let revived = 0;
      if (Date.now() - watchedAt >= WATCH_INTERVAL_MS) {
        watchedAt = Date.now();
        // Final payouts too: a reorg deeper than PAYOUT_CONFIRMATIONS can take them away.
        revived = await reviveDroppedPayouts(
          { sql, logger },
          rpc,
          await readLatestNonce(),
          config.payouts.batchSize,
          droppedSuspects,
        );
        watch = await watchMinedPayouts(
          { sql, logger, chainId: config.chain.chainId },
          rpc,
          config.payouts.confirmations,
          config.payouts.batchSize,
          watchState,
        );
      }
      if (!unfinished && watch.resent + watch.changed + revived === 0) return false;

      const latestNonce = await readLatestNonce();
      const result = await confirmPayouts(
        {
          sql,
          usdc: config.chain.usdcAddress,
          wallet: account.address,
          payTo: config.chain.payTo,
          network: networkId(config),
          logger,
        },
        rpc,
        issuer,
        latestNonce,
        config.payouts.batchSize,
      );
      if (result.confirmed + result.reverted > 0) {
        logger.info(
          { confirmed: result.confirmed, reverted: result.reverted },
          "payouts confirmed",
        );
      }
      await markNoncesTaken(result.unresolved);
      await unstickPayouts({ sql, config, logger }, rpc, account, latestNonce, unstick);
      if (result.more) return true;
      // Payouts are in flight: look again soon, so a claim completes right after its block.
      return (await hasUnfinishedPayouts(sql)) ? config.payouts.confirmPollMs : false;
    },
  };
}
