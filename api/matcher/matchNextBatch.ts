import { blocksWithTransfers, incomingTransfersAfter } from "../chain/incomingTransfers.ts";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import { TransferVerifier } from "../chain/verifyTransfers.ts";
import type { Sql, Transaction } from "../db/connect.ts";
import {
  type MatchedPayment,
  recordPayments,
  recordUnmatchedTransfers,
  type UnmatchedTransferRow,
} from "../lifecycle/recordPayments.ts";
import { type Decision, decideMatches } from "../matching/decideMatches.ts";
import { PRICE_ATOMIC } from "../money.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { phaseTimer } from "../workers/phaseTimer.ts";
import { recordAuthorizationSpentElsewhere } from "../x402/x402Payments.ts";
import { alreadyRecorded, loadMatchingContext } from "./loadMatchingContext.ts";
import {
  forgetBlocksAfter,
  isCanonical,
  lastBlockStillCanonical,
  rememberBlocks,
} from "./matcherBlocks.ts";

/** Indexed, not yet confirmed blocks with payments read ahead per idle tick (KEPT_BLOCKS keeps 32). */
const READ_AHEAD_BLOCKS = 8;

export interface BatchResult {
  /** Transfers the cursor moved past. */
  processed: number;
  matched: number;
  /** True when more confirmed transfers are waiting. */
  more: boolean;
}

/**
 * One matcher batch: the next confirmed transfers after the cursor, oldest first. Everything
 * the chain must say is asked first, with no lock or transaction held: every transfer of the
 * batch is re-checked against its block's logs (still canonical, successful, same log), and
 * the cursor's own block too. Then, in one transaction under the matching lock, the rules
 * decide and the payments, the `paid` claims, the unmatched transfers and the new cursor are
 * written together. The cursor never moves past a transfer that failed its re-check (a reorg
 * under way): the indexer corrects its rows and a later batch takes them up.
 */
export async function matchNextBatch(
  deps: ServiceDeps,
  options: { batchSize?: number; verifier?: TransferVerifier } = {},
): Promise<BatchResult> {
  const { sql, chain, config } = deps;
  // Each batch re-reads its block's header (every transaction hash in it) to know the block is
  // still canonical: for a burst's block of 10,000, batches of 2,000 matched it in ~2 s, of 500 in 6.
  const batchSize = options.batchSize ?? 2000;
  const timing = phaseTimer();
  const verifier = options.verifier ?? createTransferVerifier(deps);
  const indexed = await readIndexedBlock(sql, config.chain.chainId);
  if (indexed === null) return { processed: 0, matched: 0, more: false };
  // Never the client's cached head (up to its polling interval old): a confirmation block would
  // wait that long on top of the matcher's own interval before its payments are matched.
  const head = await chain.getBlockNumber({ cacheTime: 0 });
  const confirmedThrough = head - BigInt(config.chain.confirmations);
  const throughBlock = indexed < confirmedThrough ? indexed : confirmedThrough;
  if (throughBlock < 0n) return { processed: 0, matched: 0, more: false };

  const cursor = await readCursor(sql);
  if (cursor.blockHash && cursor.blockNumber >= 0n) {
    const decided = { blockNumber: cursor.blockNumber, blockHash: cursor.blockHash };
    if (!(await isCanonical(chain, decided))) {
      await rewindToSplit(deps, cursor);
      return { processed: 0, matched: 0, more: true };
    }
  }
  timing.lap("chain");
  const transfers = await incomingTransfersAfter(sql, cursor, throughBlock, batchSize);
  if (transfers.length === 0) {
    // A verifier kept between batches (the worker's) can use the wait: see readAhead.
    if (options.verifier && indexed > throughBlock) {
      const after = cursor.blockNumber > throughBlock ? cursor.blockNumber : throughBlock;
      await readAhead(deps, options.verifier, after, indexed);
    }
    return { processed: 0, matched: 0, more: false };
  }
  timing.lap("read");
  const verified = await verifier.verifiedPrefix(transfers);
  const logsCameShort = verifier.takeShortAnswers() > 0;
  timing.lap("verify");
  const current = transfers.slice(0, verified);
  if (verified < transfers.length) {
    const stale = transfers[verified];
    deps.logger.warn(
      { tx: stale?.txHash, logIndex: stale?.logIndex, block: String(stale?.blockNumber) },
      "indexed transfer no longer on chain as indexed (reorg?); waiting for the indexer",
    );
  }
  const lastProcessed = current.at(-1);
  if (!lastProcessed) return { processed: 0, matched: 0, more: false };

  const result = await sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
    // Only one matcher runs (its worker lock); should another have moved meanwhile, retry.
    if (!sameCursor(await readCursor(transaction, true), cursor)) {
      return { processed: 0, matched: 0, more: true };
    }
    const recorded = await alreadyRecorded(transaction, current);
    const fresh = current.filter((t) => !recorded.has(`${t.txHash}:${t.logIndex}`));
    const context = await loadMatchingContext(transaction, fresh, {
      variant: config.claims.variant,
      price: PRICE_ATOMIC,
    });
    const matched = await writeDecisions(transaction, decideMatches(fresh, context));
    await rememberBlocks(transaction, current);
    await moveCursor(transaction, lastProcessed);
    if (logsCameShort) {
      await transaction`update app.matcher_cursor set logs_short_at = now()`;
    }
    return {
      processed: current.length,
      matched,
      more: verified === transfers.length && transfers.length === batchSize,
    };
  });
  timing.lap("decide_and_write");
  // One line per batch that moved: where a burst's matching time goes (chain, index, database).
  if (result.processed > 0) {
    deps.logger.info(
      { processed: result.processed, matched: result.matched, ms: timing.laps },
      "matched a batch",
    );
  }
  return result;
}

/**
 * A reorg deeper than CONFIRMATIONS took the cursor's block. The chains split somewhere below
 * it, maybe far below: a payment can be mined again at a lower height in the new chain, where a
 * cursor stepped back by a block would never read it. The cursor goes back to the highest
 * decided block the chain still has, and everything after it is read again (what was decided
 * is known by its identity: nothing pays twice). Deeper than the kept history: it stops.
 */
async function rewindToSplit(deps: ServiceDeps, cursor: Cursor): Promise<void> {
  const { sql, chain, logger } = deps;
  const split = await lastBlockStillCanonical(sql, chain, cursor.blockNumber);
  if (!split) {
    // Deeper than every kept block: reading all history again would re-decide transfers long
    // forfeited against today's claims. The matcher stops here; a person must look.
    throw new Error(
      `a reorg took the matcher's block ${cursor.blockNumber} and every decided block kept below it: the matcher stops until a person sets its cursor (docs/operating.md#matcher-reorgs)`,
    );
  }
  const to = {
    blockNumber: split.blockNumber,
    logIndex: MAX_LOG_INDEX,
    blockHash: split.blockHash,
  };
  const rewound = await sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
    if (!sameCursor(await readCursor(transaction, true), cursor)) return false;
    await forgetBlocksAfter(transaction, to.blockNumber);
    await moveCursor(transaction, to);
    return true;
  });
  if (!rewound) return;
  logger.warn(
    { from: String(cursor.blockNumber), to: String(to.blockNumber) },
    "a reorg deeper than CONFIRMATIONS took the matcher's block; reading again from where the chains split",
  );
}

/**
 * The indexed blocks with payments after `afterBlock`, read before their confirmation, lowest
 * first, until one fails. Nothing here may fail the tick: there was nothing to match anyway.
 */
async function readAhead(
  deps: ServiceDeps,
  verifier: TransferVerifier,
  afterBlock: bigint,
  indexed: bigint,
): Promise<void> {
  try {
    for (const block of await blocksWithTransfers(
      deps.sql,
      afterBlock,
      indexed,
      READ_AHEAD_BLOCKS,
    )) {
      if (!(await verifier.readAhead(block))) return;
    }
  } catch (error) {
    deps.logger.warn({ err: error }, "could not list the blocks to read ahead");
  }
}

/** The matcher keeps one for its life: a block's transfers are read once for all its batches. */
export function createTransferVerifier(
  deps: Pick<ServiceDeps, "chain" | "config" | "logger">,
): TransferVerifier {
  return new TransferVerifier(deps.chain, deps.config.chain.usdcAddress, deps.config.chain.payTo, {
    logger: deps.logger,
  });
}

interface Cursor {
  blockNumber: bigint;
  logIndex: number;
  blockHash: string | null;
}

async function readCursor(sql: Sql, forUpdate = false): Promise<Cursor> {
  const [row] = await sql<{ block_number: bigint; log_index: number; block_hash: string | null }[]>`
    select block_number, log_index, block_hash from app.matcher_cursor
    ${forUpdate ? sql`for update` : sql``}`;
  if (!row) throw new Error("app.matcher_cursor has no row");
  return { blockNumber: row.block_number, logIndex: row.log_index, blockHash: row.block_hash };
}

function sameCursor(a: Cursor, b: Cursor): boolean {
  return a.blockNumber === b.blockNumber && a.logIndex === b.logIndex;
}

/** Above any log index a block can have: "after the whole block". */
const MAX_LOG_INDEX = 2_147_483_647;

async function moveCursor(
  transaction: Transaction,
  to: { blockNumber: bigint; logIndex: number; blockHash: string | null },
): Promise<void> {
  await transaction`
    update app.matcher_cursor
    set block_number = ${to.blockNumber}, log_index = ${to.logIndex}, block_hash = ${to.blockHash},
      updated_at = now()`;
}

/** Payments through the one writer of `paid`; unmatched transfers with their reason. */
async function writeDecisions(transaction: Transaction, decisions: Decision[]): Promise<number> {
  const payments: MatchedPayment[] = decisions.flatMap((decision) =>
    decision.kind === "match"
      ? [
          {
            claimId: decision.claimId,
            matchedBy: decision.rule,
            transfer: decision.transfer,
            verified: true,
          },
        ]
      : [],
  );
  const unmatched = decisions.flatMap((decision): UnmatchedTransferRow[] =>
    decision.kind === "unmatched"
      ? [
          {
            tx_hash: decision.transfer.txHash,
            log_index: decision.transfer.logIndex,
            block_number: String(decision.transfer.blockNumber),
            from_address: decision.transfer.from,
            value: String(decision.transfer.value),
            reason: decision.reason,
            claim_id: decision.claimId,
          },
        ]
      : [],
  );
  // The rules read these claims as payable in this transaction; a claim that cannot become
  // paid means a concurrent change: recordPayments throws and the whole batch is retried.
  const paid = await recordPayments(transaction, payments);
  await recordUnmatchedTransfers(transaction, unmatched);
  // An x402 nonce spent by another transfer, confirmed: that settlement can never happen.
  await recordAuthorizationSpentElsewhere(
    transaction,
    unmatched.flatMap((row) =>
      row.reason === "not_the_verified_authorization" && row.claim_id ? [row.claim_id] : [],
    ),
  );
  return paid.length;
}
