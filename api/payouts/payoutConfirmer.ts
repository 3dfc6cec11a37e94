import type { PrivateKeyAccount, PublicClient } from "viem";
import type { ReceiptIssuer } from "../receipts/issueReceipt.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { confirmPayouts } from "./confirmPayouts.ts";
import { type UnstickState, unstickPayouts } from "./unstickPayouts.ts";

/** A used nonce with none of our attempts mined must persist this long before it is an alarm. */
const FOREIGN_NONCE_GRACE_MS = 30_000;

/**
 * The confirmer: follows payouts after they are signed. Each round reads the wallet's mined
 * nonce, stores the outcome of payouts below it as soon as they are mined (see
 * confirmPayouts), then re-broadcasts or replaces payouts at or above it (see
 * unstickPayouts). It never takes a new nonce: replacements reuse the payout's own.
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
  const reported = new Set<string>();

  async function reportForeignNonces(unresolved: { claimId: string; nonce: bigint }[]) {
    const now = Date.now();
    const current = new Set(unresolved.map((payout) => payout.claimId));
    for (const claimId of unresolvedSince.keys()) {
      if (!current.has(claimId)) unresolvedSince.delete(claimId);
    }
    for (const payout of unresolved) {
      const since = unresolvedSince.get(payout.claimId) ?? now;
      unresolvedSince.set(payout.claimId, since);
      if (now - since < FOREIGN_NONCE_GRACE_MS || reported.has(payout.claimId)) continue;
      reported.add(payout.claimId);
      logger.error(
        { claimId: payout.claimId, nonce: payout.nonce.toString(), wallet: account.address },
        "a transaction that is not one of this payout's attempts used its nonce; the claim stays paying and is never re-signed: check the wallet",
      );
      await sql`
        update app.payouts
        set last_error = 'nonce used by a transaction that is not one of its attempts'
        where claim_id = ${payout.claimId} and status in ('signed', 'broadcast')`;
    }
  }

  return {
    name: "payout-confirmer",
    lockKey: LOCK_KEYS.payoutConfirmer,
    intervalMs: config.payouts.intervalMs,
    wakeChannel: WAKE_CHANNELS.payoutConfirmer,
    async tick() {
      const [pending] = await sql<{ any: boolean }[]>`
        select exists (
          select 1 from app.payouts where status in ('signed', 'broadcast')
        ) as any`;
      if (!pending?.any) return false;

      const latestNonce = BigInt(
        await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }),
      );
      const result = await confirmPayouts(
        sql,
        rpc,
        issuer,
        latestNonce,
        config.payouts.batchSize,
        logger,
      );
      if (result.confirmed + result.reverted > 0) {
        logger.info(
          { confirmed: result.confirmed, reverted: result.reverted },
          "payouts confirmed",
        );
      }
      await reportForeignNonces(result.unresolved);
      await unstickPayouts({ sql, config, logger }, rpc, account, latestNonce, unstick);
      if (result.more) return true;
      // Payouts are in flight: look again soon, so a claim completes right after its block.
      const [inFlight] = await sql<{ any: boolean }[]>`
        select exists (
          select 1 from app.payouts where status in ('signed', 'broadcast')
        ) as any`;
      return inFlight?.any ? config.payouts.confirmPollMs : false;
    },
  };
}
