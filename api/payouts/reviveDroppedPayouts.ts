import type { Hex, PublicClient } from "viem";
import { blockHashesAt } from "../chain/canonicalBlocks.ts";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { logBroadcast, sendPayouts } from "./broadcastPayouts.ts";
import { reviveDropped } from "./payoutRecords.ts";
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
 * head is at or past the stored block, the block at that height has another hash, and the node
 * has no receipt for the transaction, or only one in the stored block (a stale index). Anything
 * less leaves the payout as it is: a node behind the stored block, no block at that height
 * (a backend behind the one that gave the head: a real reorg always leaves a block there), a
 * call that failed, a payout stored without its block's hash, or one deeper than
 * MAX_REVIVE_DEPTH (logged for a person: no reorg goes that deep). The verdict must also hold
 * in two rounds in a row (`suspects`, kept by the caller), so one inconsistent answer revives
 * nothing. At most `limit` payouts are looked at per round, lowest nonce first.
 */
export async function reviveDroppedPayouts(
  deps: { sql: Database; logger: Logger },
  rpc: PublicClient,
  latestNonce: bigint,
  limit: number,
  suspects: Set<Hex> = new Set(),
): Promise<number> {
  const { sql, logger } = deps;
  const candidates = await sql<StoredAsMined[]>`
    select p.claim_id, p.nonce, p.tx_hash, p.raw_tx, p.block_number, p.block_hash
    from app.payouts p
    where p.status in ('confirmed', 'reverted') and p.nonce >= ${latestNonce}
      and not exists (
        select 1 from app.payouts later where later.claim_id = p.claim_id and later.nonce > p.nonce)
    order by p.nonce
    limit ${limit}`;
  if (candidates.length === 0) {
    suspects.clear();
    return 0;
  }
  const verdicts = await goneFromChain(rpc, candidates, logger);
  // Gone in this round and the one before: the rest wait for the next round's word.
  const gone = verdicts.filter((payout) => suspects.has(payout.tx_hash));
  suspects.clear();
  for (const payout of verdicts) suspects.add(payout.tx_hash);
  if (gone.length === 0) return 0;

  // Only rows still as they were read: a block stored meanwhile is the confirmer's newer word.
  const revived = await reviveDropped(sql, gone);
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

/** No reorg goes deeper than this; the matcher keeps as much history (matcherBlocks.ts). */
export const MAX_REVIVE_DEPTH = 1_000n;

/**
 * The payouts the chain no longer holds, by its own word: for each, the node's head is at or
 * past the stored block, the block at that height has another hash than the stored one, and the
 * node knows no receipt for the transaction, or one in the stored block only (its transaction
 * index is stale). See reviveDroppedPayouts for what proves nothing.
 */
async function goneFromChain(rpc: PublicClient, candidates: StoredAsMined[], logger: Logger) {
  const head = await rpc.getBlockNumber({ cacheTime: 0 }).catch(() => null);
  if (head === null) return [];
  const reached = candidates.filter((payout) => {
    if (payout.block_number === null || payout.block_hash === null) return false;
    const stored = BigInt(payout.block_number);
    if (head < stored) return false;
    if (head - stored > MAX_REVIVE_DEPTH) {
      logger.error(
        {
          nonce: String(payout.nonce),
          tx: payout.tx_hash,
          block: String(stored),
          head: String(head),
        },
        "a payout stored as mined is below the wallet's nonce on chain, deeper than any reorg: not revived; the node may be on another chain (docs/operating.md#payout-reorgs)",
      );
      return false;
    }
    return true;
  });
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
    const stored = payout.block_hash?.toLowerCase();
    // Unknown (the call failed, or no block there: a backend behind the head's), or the stored
    // block still there: nothing to say.
    if (there === undefined || there === null || there === stored) return false;
    const receipt = receipts.get(payout.tx_hash);
    if (receipt === undefined) return false;
    return receipt === null || receipt.blockHash.toLowerCase() === stored;
  });
}
