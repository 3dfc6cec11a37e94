import type { Hex, PublicClient } from "viem";
import { blockHashesAt, canonicalBlocks } from "../chain/canonicalBlocks.ts";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import type { Database } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";
import type { Logger } from "../logger.ts";
import { logBroadcast, sendPayouts } from "./broadcastPayouts.ts";
import { markFinal, moveToBlock, reopenOtherOutcome, reopenReorgedOut } from "./payoutRecords.ts";
import { type MinedReceipt, readReceipts } from "./payoutRpc.ts";

interface MinedPayout {
  claim_id: string;
  nonce: bigint;
  tx_hash: Hex;
  raw_tx: Hex;
  status: "confirmed" | "reverted";
  block_number: bigint;
  block_hash: string | null;
  indexed: boolean;
}

export interface WatchResult {
  /** Payouts a reorg took away, sent again with their stored bytes. */
  resent: number;
  /** Payouts a reorg mined again with the other outcome, handed back to the confirmer. */
  changed: number;
  /** Payouts PAYOUT_CONFIRMATIONS deep, watched no more. */
  finalized: number;
}

/**
 * Where the next round's window of watched payouts starts: each round looks at up to `limit`
 * payouts after the last one it looked at, and starts again from the lowest once it reaches the
 * end. Payouts that never become final (the indexer lacks them, the RPC never answers) can so
 * never keep the others from being looked at (docs/operating.md#payout-reorgs).
 */
export interface WatchState {
  after: bigint;
}

export function newWatchState(): WatchState {
  return { after: -1n };
}

/**
 * Follows every mined payout (confirmed or reverted) until it is `confirmations` blocks deep.
 * Each round reads the chain's block hash at each height the payouts were stored at, and the
 * receipts of only those whose block is no longer the chain's there:
 * - gone from the chain (a reorg): it is live again (`broadcast`) and its stored bytes are sent
 *   again right away, byte for byte: the same transaction, never a new one; the claim keeps
 *   its state and receipt (the transaction it names is the one coming back);
 * - mined again in another block: the block is updated;
 * - mined again with the other outcome (reverted where it had succeeded, or the reverse): it is
 *   live again (`broadcast`) with no block, so the confirmer stores the new outcome through the
 *   one path every outcome takes (confirmPayouts.ts: a completion undone, a failure cured);
 * - deep enough: final. A successful payout is final only once the indexer's outgoing
 *   transfers (the chain as Ponder read it) hold it too: the chain and our table must agree.
 * Final reverted payouts are what lets the sender sign a new payout for their claim.
 */
export async function watchMinedPayouts(
  deps: { sql: Database; logger: Logger; chainId: number },
  rpc: PublicClient,
  confirmations: number,
  limit: number,
  state: WatchState = newWatchState(),
): Promise<WatchResult> {
  const { sql, logger } = deps;
  const watched = await readWatched(sql, state.after, limit);
  // The window moves on; a short one means the end was reached, and the next starts over.
  state.after = watched.length === limit ? (watched.at(-1)?.nonce ?? -1n) : -1n;
  if (watched.length === 0) return { resent: 0, changed: 0, finalized: 0 };

  const [head, canonical, indexedThrough] = await Promise.all([
    rpc.getBlockNumber({ cacheTime: 0 }),
    canonicalBlocks(
      rpc,
      watched.flatMap((payout) =>
        payout.block_hash
          ? [{ blockNumber: BigInt(payout.block_number), blockHash: payout.block_hash }]
          : [],
      ),
    ),
    readIndexedBlock(sql, deps.chainId),
  ]);
  // A block hash commits to its transactions and their outcomes: a payout whose block is still
  // the chain's at its height is mined there as stored. Only the others need their receipts.
  const stillThere = (payout: MinedPayout) =>
    payout.block_hash !== null && canonical.has(`${payout.block_number}:${payout.block_hash}`);
  const receipts = await readReceipts(
    rpc,
    watched.filter((payout) => !stillThere(payout)).map((payout) => payout.tx_hash),
  );
  const missing: MinedPayout[] = [];
  const changed: MinedPayout[] = [];
  let finalized = 0;
  for (const payout of watched) {
    const receipt: MinedReceipt | null | undefined = stillThere(payout)
      ? {
          status: payout.status === "confirmed" ? "success" : "reverted",
          blockNumber: BigInt(payout.block_number),
          blockHash: payout.block_hash as Hex,
        }
      : receipts.get(payout.tx_hash);
    if (receipt === undefined) continue; // the RPC did not answer for it: next round
    if (receipt === null) {
      // A node whose head is below the stored block has simply not seen it yet: proves nothing.
      if (head >= BigInt(payout.block_number)) missing.push(payout);
      continue;
    }
    if (receipt.blockHash.toLowerCase() !== payout.block_hash) {
      await moveToBlock(sql, payout, receipt);
      logger.warn(
        { claimId: payout.claim_id, txHash: payout.tx_hash, block: String(receipt.blockNumber) },
        "payout mined again in another block after a reorg",
      );
    }
    if ((receipt.status === "success") !== (payout.status === "confirmed")) {
      changed.push(payout);
      continue;
    }
    if (head - receipt.blockNumber < BigInt(confirmations)) continue;
    if (payout.status === "confirmed" && !payout.indexed) {
      if (indexedThrough !== null && indexedThrough >= head) {
        logger.error(
          { claimId: payout.claim_id, txHash: payout.tx_hash },
          "the chain has this payout but the indexer's outgoing transfers do not; not final",
        );
      }
      continue;
    }
    await markFinal(sql, payout.nonce);
    finalized += 1;
  }

  if (changed.length > 0) {
    await reopenOtherOutcome(
      sql,
      changed.map((payout) => payout.nonce),
    );
    for (const payout of changed) {
      logger.warn(
        { claimId: payout.claim_id, txHash: payout.tx_hash, was: payout.status },
        "a reorg mined this payout again with the other outcome; the confirmer stores the new one",
      );
    }
  }

  // No receipt is gone only where the chain shows another block at the stored height: no block
  // there, or no answer, is a backend behind the one that gave the head (behind a load
  // balancer), which proves nothing (docs/operating.md#payout-reorgs).
  const hashes = await blockHashesAt(rpc, [
    ...new Set(missing.map((payout) => BigInt(payout.block_number))),
  ]);
  const gone = missing.filter((payout) => {
    const there = hashes.get(BigInt(payout.block_number));
    return payout.block_hash !== null && typeof there === "string" && there !== payout.block_hash;
  });
  if (gone.length > 0) {
    await reopenReorgedOut(
      sql,
      gone.map((payout) => payout.nonce),
    );
    const again = gone.map((payout) => ({
      claimId: payout.claim_id,
      nonce: payout.nonce,
      txHash: payout.tx_hash,
      rawTx: payout.raw_tx,
    }));
    const { outcomes, summary } = await sendPayouts(sql, rpc, again);
    logBroadcast(
      logger,
      "payouts a reorg took away, sent again byte for byte",
      again,
      outcomes,
      summary,
    );
  }
  return { resent: gone.length, changed: changed.length, finalized };
}

/** Up to `limit` mined payouts not final yet, after nonce `after`, lowest first. */
function readWatched(sql: Database, after: bigint, limit: number): Promise<MinedPayout[]> {
  return sql<MinedPayout[]>`
    select p.claim_id, p.nonce, p.tx_hash, p.raw_tx, p.status, p.block_number, p.block_hash,
      exists (select 1 from app.payout_attempts a
        join chain.outgoing_transfer o on o.tx_hash = a.tx_hash
        where a.nonce = p.nonce) as indexed
    from app.payouts p
    where p.status in ('confirmed', 'reverted') and p.final_at is null and p.nonce > ${after}
    order by p.nonce
    limit ${limit}`.catch((error: unknown) => {
    if (!hasSqlState(error, SQL_STATE.undefinedTable)) throw error;
    return readWithoutIndex(sql, after, limit);
  });
}

/** Before the indexer has made its views: the same rows, none of them indexed yet. */
function readWithoutIndex(sql: Database, after: bigint, limit: number) {
  return sql<MinedPayout[]>`
    select claim_id, nonce, tx_hash, raw_tx, status, block_number, block_hash, false as indexed
    from app.payouts
    where status in ('confirmed', 'reverted') and final_at is null and nonce > ${after}
    order by nonce
    limit ${limit}`;
}
