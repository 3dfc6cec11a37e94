import type { Hex, PrivateKeyAccount, PublicClient } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { logBroadcast, sendPayouts } from "./broadcastPayouts.ts";
import { readCurrentFees, replacementFees } from "./payoutFees.ts";
import { recordReplacement } from "./payoutRecords.ts";
import type { PayoutTx } from "./signNewPayouts.ts";
import { signReplacement } from "./signPayoutTransaction.ts";

interface StalePayout {
  claim_id: string;
  nonce: bigint;
  tx_hash: Hex;
  raw_tx: Hex;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  replace_due: boolean;
  rebroadcast_due: boolean;
}

export interface UnstickState {
  /** Attempts already at the fee cap (and warned about): re-broadcast only. */
  atCap: Set<Hex>;
}

/**
 * For payouts whose nonce the chain has not used yet (`nonce >= latestNonce`):
 * - broadcast, and not sent for `rebroadcastAfterMs` → the same bytes again (a node may have
 *   dropped them; the hash stays the same);
 * - its newest attempt older than `replaceAfterMs` → a same-nonce replacement with higher fees,
 *   stored as a new attempt before it is sent; only where a fee can be the problem (pooled and
 *   not mined, or refused for a fee cap below the base fee), never for want of ETH, which a
 *   higher fee only makes worse. At the fee cap there is nothing to replace with: it keeps
 *   being re-broadcast and a warning is logged.
 */
export async function unstickPayouts(
  deps: { sql: Database; config: ServiceConfig; logger: Logger },
  rpc: PublicClient,
  account: PrivateKeyAccount,
  latestNonce: bigint,
  state: UnstickState,
): Promise<{ rebroadcast: number; replaced: number }> {
  const { sql, config, logger } = deps;
  const stale = await sql<StalePayout[]>`
    select * from (
      select p.claim_id, p.nonce, p.tx_hash, p.raw_tx,
        a.max_fee_per_gas, a.max_priority_fee_per_gas,
        (a.created_at < now() - make_interval(secs => ${config.payouts.replaceAfterMs / 1000})
          and ((p.status = 'broadcast' and coalesce(p.last_error, '') not like 'insufficient_funds%')
            or p.last_error like 'fee_cap_too_low%')) as replace_due,
        (p.status = 'broadcast' and (p.last_broadcast_at is null or p.last_broadcast_at
          < now() - make_interval(secs => ${config.payouts.rebroadcastAfterMs / 1000}))) as rebroadcast_due
      from app.payouts p
      join app.payout_attempts a on a.tx_hash = p.tx_hash
      where p.status in ('signed', 'broadcast') and p.nonce >= ${latestNonce}
    ) due
    where replace_due or rebroadcast_due
    order by nonce
    limit ${config.payouts.batchSize}`;
  if (stale.length === 0) return { rebroadcast: 0, replaced: 0 };

  const toReplace = stale.filter(
    (payout) => payout.replace_due && !state.atCap.has(payout.tx_hash),
  );
  const replacements =
    toReplace.length > 0 ? await replace(deps, rpc, account, toReplace, state) : [];
  const replacedIds = new Set(replacements.map((payout) => payout.claimId));
  const again = stale
    .filter((payout) => payout.rebroadcast_due && !replacedIds.has(payout.claim_id))
    .map((payout) => ({
      claimId: payout.claim_id,
      nonce: payout.nonce,
      txHash: payout.tx_hash,
      rawTx: payout.raw_tx,
    }));

  // Lowest nonces first: a replacement often unblocks everything after it.
  const toSend = [...replacements, ...again];
  if (toSend.length === 0) return { rebroadcast: 0, replaced: 0 };
  const { outcomes, summary } = await sendPayouts(sql, rpc, toSend);
  logBroadcast(
    logger,
    `re-sent ${again.length} and replaced ${replacements.length} payouts`,
    toSend,
    outcomes,
    summary,
  );
  return { rebroadcast: again.length, replaced: replacements.length };
}

async function replace(
  deps: { sql: Database; config: ServiceConfig; logger: Logger },
  rpc: PublicClient,
  account: PrivateKeyAccount,
  due: StalePayout[],
  state: UnstickState,
): Promise<PayoutTx[]> {
  const { sql, config, logger } = deps;
  const current = await readCurrentFees(rpc, config.payouts.maxFeePerGas);
  return sql.begin(async (transaction) => {
    // Only rows nobody else is replacing, and only if still at the attempt we looked at.
    const locked = await transaction<{ claim_id: string; tx_hash: Hex }[]>`
      select claim_id, tx_hash from app.payouts
      where claim_id = any(${transaction.array(due.map((payout) => payout.claim_id))}::text[])
        and status in ('signed', 'broadcast')
      for update skip locked`;
    const lockedAt = new Map(locked.map((row) => [row.claim_id, row.tx_hash]));
    const replaced: PayoutTx[] = [];
    for (const payout of due) {
      if (lockedAt.get(payout.claim_id) !== payout.tx_hash) continue;
      const previous = {
        maxFeePerGas: BigInt(payout.max_fee_per_gas),
        maxPriorityFeePerGas: BigInt(payout.max_priority_fee_per_gas),
      };
      const fees = replacementFees(previous, current, config.payouts.maxFeePerGas);
      if (!fees) {
        state.atCap.add(payout.tx_hash);
        logger.warn(
          {
            claimId: payout.claim_id,
            nonce: payout.nonce.toString(),
            maxFeePerGas: previous.maxFeePerGas.toString(),
            cap: config.payouts.maxFeePerGas.toString(),
          },
          "payout stuck at the fee cap (PAYOUT_MAX_FEE_GWEI); re-broadcasting it as it is",
        );
        continue;
      }
      const signed = await signReplacement(account, payout.raw_tx, fees);
      await recordReplacement(transaction, {
        claimId: payout.claim_id,
        nonce: payout.nonce,
        txHash: signed.txHash,
        rawTx: signed.rawTx,
        fees,
      });
      replaced.push({ claimId: payout.claim_id, nonce: payout.nonce, ...signed });
      logger.info(
        {
          claimId: payout.claim_id,
          nonce: payout.nonce.toString(),
          replaces: payout.tx_hash,
          txHash: signed.txHash,
          maxFeePerGas: fees.maxFeePerGas.toString(),
        },
        "payout replaced with higher fees (same nonce)",
      );
    }
    return replaced;
  });
}
