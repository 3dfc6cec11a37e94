import { type Hex, numberToHex, type PublicClient } from "viem";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { logBroadcast, sendPayouts } from "./broadcastPayouts.ts";
import { readReceipts } from "./payoutRpc.ts";

interface StoredAsMined {
  claim_id: string;
  nonce: bigint;
  tx_hash: Hex;
  raw_tx: Hex;
  block_number: bigint | null;
  block_hash: string | null;
}

/**
 * Payouts stored as mined (final or not) that a reorg deeper than PAYOUT_CONFIRMATIONS took
 * away (docs/operating.md#payout-reorgs). Left so, they would hold every new payout
 * (signCoveredPayouts.ts: stored payouts ahead of the chain) and nothing would send them again.
 * Each one that is still its claim's last payout is live again (`broadcast`, no block, not
 * final) and its stored bytes are sent again, byte for byte: the same transaction, so the claim
 * can still be paid once at most; the confirmer then stores its outcome as for any payout (a
 * completion undone if it now reverts). A payout that a later one of its claim replaced is
 * never sent again: fillNonceGaps.ts fills its nonce instead.
 *
 * The wallet's mined nonce only says where to look: a node that lags, or lies, answers a low
 * one. A payout is taken for gone only on the chain's own word about its block: the node's
 * head is at or past the stored block, the block there is not the stored one (another hash, or
 * none), and the node has no receipt for the transaction. A node behind the stored block proves
 * nothing, and any answer missing leaves the payout as it is until a later round. At most
 * `limit` payouts are looked at per round, lowest nonce first.
 */
export async function reviveDroppedPayouts(
  deps: { sql: Database; logger: Logger },
  rpc: PublicClient,
  latestNonce: bigint,
  limit: number,
): Promise<number> {
  const { sql, logger } = deps;
  const suspects = await sql<StoredAsMined[]>`
    select p.claim_id, p.nonce, p.tx_hash, p.raw_tx, p.block_number, p.block_hash
    from app.payouts p
    where p.status in ('confirmed', 'reverted') and p.nonce >= ${latestNonce}
      and not exists (
        select 1 from app.payouts later where later.claim_id = p.claim_id and later.nonce > p.nonce)
    order by p.nonce
    limit ${limit}`;
  if (suspects.length === 0) return 0;
  const gone = await goneFromChain(rpc, suspects);
  if (gone.length === 0) return 0;

  // Only rows still as they were read: a block stored meanwhile is the confirmer's newer word.
  const revived = await sql<{ claim_id: string; nonce: bigint; tx_hash: Hex; raw_tx: Hex }[]>`
    update app.payouts p
    set status = 'broadcast', block_number = null, block_hash = null, confirmed_at = null,
      final_at = null, revert_reason = null,
      last_error = 'not on chain after a reorg deeper than PAYOUT_CONFIRMATIONS; sent again'
    from unnest(${gone.map((payout) => String(payout.nonce))}::int8[],
        ${gone.map((payout) => payout.block_hash)}::text[]) as seen(nonce, block_hash)
    where p.nonce = seen.nonce and p.status in ('confirmed', 'reverted')
      and p.block_hash is not distinct from seen.block_hash
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

/**
 * The payouts the chain no longer holds, by its own word: for each, the node's head is at or
 * past the stored block, the block at that height is not the stored one (another hash, or
 * none), and the node knows no receipt for the transaction. A payout without a stored block
 * hash (stored before hashes were kept) rests on the receipt alone, once the head is past it.
 */
async function goneFromChain(rpc: PublicClient, suspects: StoredAsMined[]) {
  const head = await rpc.getBlockNumber({ cacheTime: 0 }).catch(() => null);
  if (head === null) return [];
  const reached = suspects.filter(
    (payout) => payout.block_number !== null && head >= BigInt(payout.block_number),
  );
  if (reached.length === 0) return [];
  const heights = [...new Set(reached.map((payout) => BigInt(payout.block_number ?? 0n)))];
  const [hashes, receipts] = await Promise.all([
    blockHashesAt(rpc, heights),
    readReceipts(
      rpc,
      reached.map((payout) => payout.tx_hash),
    ),
  ]);
  return reached.filter((payout) => {
    const there = hashes.get(BigInt(payout.block_number ?? 0n));
    // Unknown (the call failed), or the stored block still there: nothing to say.
    if (there === undefined) return false;
    if (payout.block_hash !== null && there === payout.block_hash.toLowerCase()) return false;
    return receipts.get(payout.tx_hash) === null;
  });
}

/** The hash of the block at each height (null: the node has none there); absent: no answer. */
async function blockHashesAt(rpc: PublicClient, heights: bigint[]) {
  const hashes = new Map<bigint, string | null>();
  await Promise.all(
    heights.map(async (height) => {
      const block = await rpc
        .request({ method: "eth_getBlockByNumber", params: [numberToHex(height), false] })
        .catch(() => undefined);
      if (block === undefined) return;
      hashes.set(height, block?.hash ? block.hash.toLowerCase() : null);
    }),
  );
  return hashes;
}
