import type { Hex, PublicClient } from "viem";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { logBroadcast, sendPayouts } from "./broadcastPayouts.ts";

/**
 * Payouts stored as mined (final or not) at a nonce the chain has not reached: a reorg deeper
 * than PAYOUT_CONFIRMATIONS took them away (docs/operating.md#payout-reorgs). Left so, they
 * would hold every new payout (signCoveredPayouts.ts: stored payouts ahead of the chain) and
 * nothing would send them again. Each one that is still its claim's last payout is live again
 * (`broadcast`, no block, not final) and its stored bytes are sent again, byte for byte: the
 * same transaction, so the claim can still be paid once at most; the confirmer then stores its
 * outcome as for any payout (a completion undone if it now reverts). A payout that a later one
 * of its claim replaced is never sent again: fillNonceGaps.ts fills its nonce instead.
 * A node behind the others only makes this send bytes the chain already holds: harmless.
 */
export async function reviveDroppedPayouts(
  deps: { sql: Database; logger: Logger },
  rpc: PublicClient,
  latestNonce: bigint,
): Promise<number> {
  const { sql, logger } = deps;
  const revived = await sql<{ claim_id: string; nonce: bigint; tx_hash: Hex; raw_tx: Hex }[]>`
    update app.payouts p
    set status = 'broadcast', block_number = null, block_hash = null, confirmed_at = null,
      final_at = null, revert_reason = null,
      last_error = 'not on chain after a reorg deeper than PAYOUT_CONFIRMATIONS; sent again'
    where p.status in ('confirmed', 'reverted') and p.nonce >= ${latestNonce}
      and not exists (
        select 1 from app.payouts later where later.claim_id = p.claim_id and later.nonce > p.nonce)
    returning p.claim_id, p.nonce, p.tx_hash, p.raw_tx`;
  if (revived.length === 0) return 0;
  const again = revived.map((payout) => ({
    claimId: payout.claim_id,
    nonce: payout.nonce,
    txHash: payout.tx_hash,
    rawTx: payout.raw_tx,
  }));
  const { outcomes, summary } = await sendPayouts(sql, rpc, again);
  logBroadcast(
    logger,
    "payouts a reorg deeper than PAYOUT_CONFIRMATIONS took away, sent again byte for byte",
    again,
    outcomes,
    summary,
  );
  return revived.length;
}
