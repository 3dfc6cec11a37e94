import { incomingTransfersAfter } from "../chain/incomingTransfers.ts";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { type Decision, decideMatches } from "./decideMatches.ts";
import { alreadyRecorded, loadMatchingContext } from "./loadMatchingContext.ts";
import { verifiedPrefix } from "./verifyPayments.ts";

export interface BatchResult {
  /** Transfers the cursor moved past. */
  processed: number;
  matched: number;
  /** True when more confirmed transfers are waiting. */
  more: boolean;
}

/**
 * One matcher batch, in one transaction: the next confirmed transfers after the cursor,
 * oldest first, decided by the rules, the matched ones re-checked on the RPC, then the
 * payments, the `paid` claims, the unmatched transfers and the new cursor written together.
 * A transfer whose re-check fails (a reorg under way) stops the batch before it; the indexer
 * will correct its rows and a later batch takes it up.
 */
export async function matchNextBatch(deps: ServiceDeps, batchSize = 500): Promise<BatchResult> {
  const { sql, chain, config } = deps;
  const indexed = await readIndexedBlock(sql, config.chain.chainId);
  if (indexed === null) return { processed: 0, matched: 0, more: false };
  const head = await chain.getBlockNumber();
  const confirmedThrough = head - BigInt(config.chain.confirmations);
  const throughBlock = indexed < confirmedThrough ? indexed : confirmedThrough;
  if (throughBlock < 0n) return { processed: 0, matched: 0, more: false };

  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
    const [cursor] = await transaction<{ block_number: bigint; log_index: number }[]>`
      select block_number, log_index from app.matcher_cursor for update`;
    if (!cursor) throw new Error("app.matcher_cursor has no row");
    const transfers = await incomingTransfersAfter(
      transaction,
      { blockNumber: cursor.block_number, logIndex: cursor.log_index },
      throughBlock,
      batchSize,
    );
    if (transfers.length === 0) return { processed: 0, matched: 0, more: false };

    const recorded = await alreadyRecorded(transaction, transfers);
    const fresh = transfers.filter((t) => !recorded.has(`${t.txHash}:${t.logIndex}`));
    const context = await loadMatchingContext(transaction, fresh, {
      variant: config.claims.variant,
      price: PRICE_ATOMIC,
    });
    const decisions = decideMatches(fresh, context);

    const matches = decisions.filter((decision) => decision.kind === "match");
    const verified = await verifiedPrefix(
      chain,
      config.chain.usdcAddress,
      config.chain.payTo,
      matches.map((decision) => decision.transfer),
    );
    let kept = decisions;
    let lastProcessed = transfers[transfers.length - 1];
    const firstUnverified = matches[verified];
    if (firstUnverified) {
      deps.logger.warn(
        { tx: firstUnverified.transfer.txHash, logIndex: firstUnverified.transfer.logIndex },
        "payment failed its receipt re-check (reorg?); waiting for the indexer",
      );
      kept = decisions.slice(0, decisions.indexOf(firstUnverified));
      const stopAt = transfers.indexOf(firstUnverified.transfer);
      lastProcessed = stopAt > 0 ? transfers[stopAt - 1] : undefined;
    }
    if (!lastProcessed) return { processed: 0, matched: 0, more: false };

    const matched = await writeDecisions(transaction, kept);
    await transaction`
      update app.matcher_cursor
      set block_number = ${lastProcessed.blockNumber}, log_index = ${lastProcessed.logIndex},
        updated_at = now()`;
    const processed = transfers.indexOf(lastProcessed) + 1;
    return { processed, matched, more: !firstUnverified && transfers.length === batchSize };
  });
}

async function writeDecisions(transaction: Sql, decisions: Decision[]): Promise<number> {
  const payments = decisions.flatMap((decision) =>
    decision.kind === "match"
      ? [
          {
            tx_hash: decision.transfer.txHash,
            log_index: decision.transfer.logIndex,
            claim_id: decision.claimId,
            block_number: String(decision.transfer.blockNumber),
            block_hash: decision.transfer.blockHash,
            from_address: decision.transfer.from,
            value: String(decision.transfer.value),
            matched_by: decision.rule,
          },
        ]
      : [],
  );
  const unmatched = decisions.flatMap((decision) =>
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

  if (payments.length > 0) {
    await transaction`insert into app.payments ${transaction(payments)}`;
    const claimIds = payments.map((payment) => payment.claim_id);
    const updated = await transaction`
      update app.claims set status = 'paid', paid_at = now()
      where id = any(${claimIds}) and status in ('awaiting_payment', 'expired')
      returning id`;
    // The rules read these claims as payable in this transaction; anything else means a
    // concurrent change: roll the whole batch back and decide again.
    if (updated.length !== claimIds.length) {
      throw new Error("claims changed while the batch was decided; it will be retried");
    }
    await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
    // An x402 payment whose settlement outcome was unknown: the chain has now told.
    const settledByChain = payments.filter((payment) => payment.matched_by === "x402");
    if (settledByChain.length > 0) {
      await transaction`
        update app.x402_payments x
        set status = 'settled', settlement_tx = settled.tx_hash, updated_at = now()
        from unnest(${settledByChain.map((payment) => payment.claim_id)}::text[],
          ${settledByChain.map((payment) => payment.tx_hash)}::text[]) as settled (claim_id, tx_hash)
        where x.claim_id = settled.claim_id and x.status in ('settling', 'unknown')`;
    }
  }
  if (unmatched.length > 0) {
    await transaction`
      insert into app.unmatched_transfers ${transaction(unmatched)}
      on conflict (tx_hash, log_index) do nothing`;
  }
  return payments.length;
}
