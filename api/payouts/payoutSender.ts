import type { PrivateKeyAccount, PublicClient } from "viem";
import { crashIfConfigured } from "../crashHook.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { logBroadcast, recordOutcomes, sendPayouts, summarize } from "./broadcastPayouts.ts";
import { readPayoutFunding } from "./payoutFunding.ts";
import { sendRawTransactions } from "./payoutRpc.ts";
import { type PayoutTx, signNewPayouts } from "./signNewPayouts.ts";

const UNIQUE_VIOLATION = "23505";
const MAX_RETRY_DELAY_MS = 30_000;

interface PayoutRow {
  claim_id: string;
  nonce: bigint;
  tx_hash: PayoutTx["txHash"];
  raw_tx: PayoutTx["rawTx"];
}

const toPayoutTx = (row: PayoutRow): PayoutTx => ({
  claimId: row.claim_id,
  nonce: row.nonce,
  txHash: row.tx_hash,
  rawTx: row.raw_tx,
});

/**
 * The sender: the only place new payout nonces are taken. Each round, in this order:
 * 1. once after taking the lock, reconcile: every unfinished payout the chain has not used
 *    the nonce of is re-broadcast byte for byte (a crash may have lost them anywhere between
 *    our commit and the node's pool);
 * 2. payouts still `signed` (never accepted) go out first, lowest nonce first; while any
 *    fails, nothing newer is signed and the round retries later with backoff;
 * 3. `paid` claims, as many as the wallet's USDC and ETH cover, are signed and stored in one
 *    transaction, then broadcast.
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

  /** Logs why no new payout is signed, once per change of reason, not every round. */
  function hold(reason: string | null, fields: Record<string, unknown> = {}): void {
    if (reason === lastHold) return;
    if (reason) logger.warn(fields, reason);
    else if (lastHold) logger.info("payouts resume");
    lastHold = reason;
  }

  async function reconcile(): Promise<void> {
    const unfinished = await sql<PayoutRow[]>`
      select claim_id, nonce, tx_hash, raw_tx from app.payouts
      where status in ('signed', 'broadcast') order by nonce`;
    if (unfinished.length === 0) return;
    const latestNonce = BigInt(
      await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }),
    );
    const unmined = unfinished.filter((row) => row.nonce >= latestNonce).map(toPayoutTx);
    const { outcomes, summary } = await sendPayouts(sql, rpc, unmined);
    logBroadcast(
      logger,
      "reconciled on start: re-broadcast byte for byte",
      unmined,
      outcomes,
      summary,
    );
    logger.info(
      { unfinished: unfinished.length, belowChainNonce: unfinished.length - unmined.length },
      "reconciled on start; payouts below the chain nonce are left to the confirmer",
    );
  }

  /** Sends payouts still `signed`; false while any of them is not accepted. */
  async function sendWaiting(): Promise<boolean> {
    const waiting = await sql<PayoutRow[]>`
      select claim_id, nonce, tx_hash, raw_tx from app.payouts
      where status = 'signed' order by nonce limit ${config.payouts.batchSize * 4}`;
    if (waiting.length === 0) return true;
    // Below the chain's nonce they are mined (or the nonce went elsewhere): the confirmer's.
    const latestNonce = BigInt(
      await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }),
    );
    const unmined = waiting.filter((row) => row.nonce >= latestNonce).map(toPayoutTx);
    if (unmined.length === 0) return true;
    const { outcomes, summary } = await sendPayouts(sql, rpc, unmined);
    logBroadcast(logger, "broadcast signed payouts", unmined, outcomes, summary);
    return summary.broadcast === unmined.length;
  }

  async function signCovered(): Promise<PayoutTx[]> {
    const [waiting] = await sql<{ any: boolean }[]>`
      select exists (select 1 from app.claims where status = 'paid') as any`;
    if (!waiting?.any) return [];
    const [funding, pendingNonce] = await Promise.all([
      readPayoutFunding({ sql, chain: rpc, config }),
      rpc.getTransactionCount({ address: account.address, blockTag: "pending" }).then(BigInt),
    ]);
    if (funding.fees.baseFeePerGas >= config.payouts.maxFeePerGas) {
      hold("base fee at or above PAYOUT_MAX_FEE_GWEI; no payout is signed until it falls", {
        baseFeePerGas: funding.fees.baseFeePerGas.toString(),
      });
      return [];
    }
    const limit = Math.min(config.payouts.batchSize, funding.coveredByUsdc, funding.coveredByEth);
    if (limit <= 0) {
      hold("payout wallet cannot fund the next payout; claims wait in paid", {
        wallet: funding.wallet,
        usdcBalance: funding.usdcBalance.toString(),
        ethBalance: funding.ethBalance.toString(),
        outstandingPayouts: funding.outstandingPayouts,
        paidClaims: funding.paidClaims,
      });
      return [];
    }
    // A payout stored as mined at a nonce the chain has not reached: another wallet behind the
    // key, a reset chain or a deep reorg. New nonces from this database would leave a gap.
    const [mismatch] = await sql<{ found: boolean }[]>`
      select exists (
        select 1 from app.payouts
        where status in ('confirmed', 'reverted') and nonce >= ${funding.latestNonce}
      ) as found`;
    if (mismatch?.found) {
      hold("stored payouts are ahead of the wallet's nonce on chain; signing stops", {
        wallet: funding.wallet,
        latestNonce: funding.latestNonce.toString(),
      });
      return [];
    }
    hold(null);
    try {
      return await signNewPayouts(sql, account, config, {
        limit,
        pendingNonce,
        fees: funding.fees,
      });
    } catch (error) {
      if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
      logger.warn("another sender took the same nonces; this round is rolled back");
      return [];
    }
  }

  return {
    name: "payout-sender",
    lockKey: LOCK_KEYS.payoutSender,
    intervalMs: config.payouts.intervalMs,
    wakeChannel: WAKE_CHANNELS.payoutSender,
    async tick() {
      if (!reconciled) {
        await reconcile();
        reconciled = true;
      }
      if (Date.now() < retryAt) return false;
      if (!(await sendWaiting())) {
        failures += 1;
        retryAt = Date.now() + Math.min(MAX_RETRY_DELAY_MS, 500 * 2 ** (failures - 1));
        return false;
      }
      failures = 0;

      const signed = await signCovered();
      if (signed.length === 0) return false;
      logger.info(
        { payouts: signed.length, firstNonce: signed[0]?.nonce.toString() },
        "signed and stored payouts",
      );
      crashIfConfigured(config, "after_payouts_signed");
      const outcomes = await sendRawTransactions(
        rpc,
        signed.map((payout) => payout.rawTx),
      );
      crashIfConfigured(config, "after_payouts_broadcast");
      await recordOutcomes(sql, signed, outcomes);
      await wakeWorker(sql, WAKE_CHANNELS.payoutConfirmer);
      logBroadcast(logger, "broadcast new payouts", signed, outcomes, summarize(outcomes));
      return signed.length === config.payouts.batchSize;
    },
  };
}
