import { BlockNotFoundError, type PublicClient } from "viem";
import type { Sql, Transaction } from "../db/connect.ts";
import { forgetUnmatchedTransfersAfter } from "../lifecycle/recordPayments.ts";

/**
 * Blocks behind the cursor whose hashes are kept (beyond the newest KEPT_ALWAYS): a reorg deeper
 * than all of them stops the matcher for a person. About two days of Base's 2 s blocks, far
 * past its L1 finality.
 */
const KEPT_BLOCKS = 100_000n;
/** The newest decided blocks are kept whatever their age: a quiet deployment keeps a history. */
const KEPT_ALWAYS = 1_000;
/** Stored blocks checked against the chain at once while looking for where the chains split. */
const CHECKED_AT_ONCE = 16;

export interface DecidedBlock {
  blockNumber: bigint;
  blockHash: string;
}

/**
 * In the batch's transaction: the blocks its transfers were in, under the hashes they were
 * verified in, and what is older than the window forgotten.
 */
export async function rememberBlocks(
  transaction: Transaction,
  blocks: DecidedBlock[],
): Promise<void> {
  const distinct = new Map(blocks.map((block) => [block.blockNumber, block.blockHash]));
  if (distinct.size === 0) return;
  const numbers = [...distinct.keys()];
  await transaction`
    insert into app.matcher_blocks (block_number, block_hash)
    select * from unnest(${numbers.map(String)}::int8[], ${[...distinct.values()]}::text[])
    on conflict (block_number) do update set block_hash = excluded.block_hash`;
  let highest = numbers[0] as bigint;
  for (const number of numbers) if (number > highest) highest = number;
  await transaction`
    delete from app.matcher_blocks
    where block_number < ${String(highest - KEPT_BLOCKS)}
      and block_number < (
        select min(block_number) from (
          select block_number from app.matcher_blocks
          order by block_number desc limit ${KEPT_ALWAYS}) newest)`;
}

/**
 * Where the chains split, below `belowBlock`: the highest decided block the chain still has
 * under the same hash (a block's hash commits to its parent, so every block below it is the
 * same on both chains). Null when none is: the reorg is deeper than the kept history. An RPC
 * that fails throws (the next tick asks again): only a block the chain answers with another
 * hash, or does not have while its head is past it, is taken for reorganised.
 */
export async function lastBlockStillCanonical(
  sql: Sql,
  chain: PublicClient,
  belowBlock: bigint,
): Promise<DecidedBlock | null> {
  let below = belowBlock;
  for (;;) {
    const page = await sql<{ block_number: string; block_hash: string }[]>`
      select block_number::text, block_hash from app.matcher_blocks
      where block_number < ${String(below)}
      order by block_number desc limit ${CHECKED_AT_ONCE}`;
    if (page.length === 0) return null;
    const blocks = page.map((row) => ({
      blockNumber: BigInt(row.block_number),
      blockHash: row.block_hash,
    }));
    const stillThere = await Promise.all(blocks.map((block) => isCanonical(chain, block)));
    const found = blocks.find((_, index) => stillThere[index]);
    if (found) return found;
    below = (blocks.at(-1) as DecidedBlock).blockNumber;
  }
}

/** The chain has this block at its height: true, false, or a thrown RPC failure (retried). */
export async function isCanonical(chain: PublicClient, block: DecidedBlock): Promise<boolean> {
  try {
    const header = await chain.getBlock({ blockNumber: block.blockNumber });
    return header.hash?.toLowerCase() === block.blockHash.toLowerCase();
  } catch (error) {
    if (!(error instanceof BlockNotFoundError)) throw error;
    // A node behind the block (a lagging backend of a load-balanced RPC) does not have it
    // either: only a chain whose head is past it has replaced it.
    const head = await chain.getBlockNumber({ cacheTime: 0 });
    if (head >= block.blockNumber) return false;
    throw error;
  }
}

/**
 * In the rewinding transaction: the blocks above the split are forgotten, and so are the
 * transfers recorded as unmatched there (read again, each is decided again where it is now).
 * Payments stay: a transfer that paid a claim is known by its identity wherever a reorg mines
 * it again, and pays nothing twice.
 */
export async function forgetBlocksAfter(
  transaction: Transaction,
  blockNumber: bigint,
): Promise<void> {
  await transaction`delete from app.matcher_blocks where block_number > ${String(blockNumber)}`;
  await forgetUnmatchedTransfersAfter(transaction, blockNumber);
}
