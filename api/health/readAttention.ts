import { readIndexedBlock } from "../chain/indexedBlock.ts";
import { pinIndexerViews, readIndexerTables } from "../chain/indexerSchema.ts";
import type { Database, Sql, Transaction } from "../db/connect.ts";
import type { ATTENTION_REASONS } from "../reasons/reasonCatalog.ts";
import {
  type AttentionMarks,
  heldNonce,
  NOTHING_CHECKED,
  readAttentionMarks,
} from "./attentionChecked.ts";

/** How many things of each kind wait for a person. */
export type Attention = Record<(typeof ATTENTION_REASONS)[number], number>;

/** Where payments count as at depth: the indexer's block less CONFIRMATIONS. */
export interface AttentionDepth {
  chainId: number;
  confirmations: number;
}

/**
 * Payouts whose nonce a foreign transaction took, x402 settlements lost for good, and what the
 * indexer's view of the chain shows against our records: USDC the payout wallet sent that is
 * none of our payouts, payouts whose payment a reorg took away, and claims paid out twice.
 * Rows the attention check has found settled for good are not read again
 * (docs/operating.md#attention-checked-through): the counts are those of every row all the same.
 */
export function readAttention(
  sql: Database,
  depth: AttentionDepth,
  options: { timeoutMs?: number } = {},
): Promise<Attention> {
  return inOneReading(
    sql,
    async (tx, indexer) =>
      countAttention(tx, depth, indexer, await readAttentionMarks(tx, depth, indexer)),
    options.timeoutMs,
  );
}

/**
 * The counts past the marks and those of every row, in one reading: they differ only when a mark
 * passed what can still need attention (`pay-and-earn doctor` says so).
 */
export function readAttentionBothWays(
  sql: Database,
  depth: AttentionDepth,
): Promise<{ marked: Attention; everyRow: Attention }> {
  return inOneReading(sql, async (tx, indexer) => ({
    marked: await countAttention(tx, depth, indexer, await readAttentionMarks(tx, depth, indexer)),
    everyRow: await countAttention(tx, depth, indexer, NOTHING_CHECKED),
  }));
}

/**
 * One snapshot, with the `chain` views pinned before it is taken: the marks and every count read
 * one index of the chain, whatever Ponder re-points meanwhile. `indexer` is null before Ponder
 * made the views. With `timeoutMs` (health's), PostgreSQL gives up on the reading too: a caller
 * that stopped waiting must not leave the views pinned, or Ponder's re-pointing would wait for
 * it and the matcher's and sender's reads of the chain behind Ponder.
 */
function inOneReading<T>(
  sql: Database,
  read: (tx: Transaction, indexer: string | null) => Promise<T>,
  timeoutMs?: number,
): Promise<T> {
  return sql.begin("isolation level repeatable read read only", async (tx) => {
    if (timeoutMs !== undefined) {
      await tx`select set_config('statement_timeout', ${String(timeoutMs)}, true),
        set_config('lock_timeout', ${String(timeoutMs)}, true)`;
    }
    const pinned = await pinIndexerViews(tx);
    return read(tx, pinned ? await readIndexerTables(tx) : null);
  }) as Promise<T>;
}

/** The counts, reading what is after `marks` or held (NOTHING_CHECKED: every row). */
async function countAttention(
  sql: Sql,
  depth: AttentionDepth,
  indexer: string | null,
  marks: AttentionMarks,
): Promise<Attention> {
  const [row] = await sql<{ nonce_taken: number; lost: number }[]>`
    select
      (select count(*)::int from app.payouts
        where nonce_taken_at is not null and status in ('signed', 'broadcast')) as nonce_taken,
      (select count(*)::int from app.x402_payments where status = 'lost') as lost`;
  const indexed = indexer !== null;
  return {
    payout_nonce_taken: row?.nonce_taken ?? 0,
    payout_wallet_foreign_transfer: indexed ? await readForeignTransfers(sql, marks) : 0,
    x402_settlement_lost: row?.lost ?? 0,
    payout_without_payment: indexed ? await readPayoutsWithoutPayment(sql, depth, marks) : 0,
    claim_paid_twice: indexed ? await readClaimsPaidTwice(sql, marks) : 0,
    payout_missing_on_chain: indexed ? await readFinalPayoutsMissing(sql, marks) : 0,
  };
}

/** The indexer's outgoing transfers after the mark, and those held: each position once. */
function transfersToRead(sql: Sql, marks: AttentionMarks) {
  return sql`
    select o.tx_hash, o.log_index from chain.outgoing_transfer o
    where (o.block_number, o.log_index)
      > (${marks.transfersThrough.block}::numeric, ${marks.transfersThrough.log}::int)
    union
    select o.tx_hash, o.log_index from app.attention_held h
    join chain.outgoing_transfer o on o.tx_hash = split_part(h.key, ':', 1)
      and o.log_index = split_part(h.key, ':', 2)::int
    where h.reason = 'payout_wallet_foreign_transfer'`;
}

/** USDC the payout wallet sent in a transaction that is none of our payout attempts. */
function readForeignTransfers(sql: Sql, marks: AttentionMarks): Promise<number> {
  return readCount(sql<{ n: number }[]>`
    select count(*)::int as n from (${transfersToRead(sql, marks)}) o
    where not exists (select 1 from app.payout_attempts a where a.tx_hash = o.tx_hash)`);
}

/**
 * Claims holding a payout that moved or may move USDC (signed, broadcast or confirmed) whose
 * recorded payment should be at depth by now (its block is), yet the indexer holds no transfer
 * of that identity (transaction, sender, value: what a reorg that mines it again elsewhere
 * keeps) at depth: a reorg deeper than CONFIRMATIONS took the payment away after the payout was
 * signed (docs/operating.md#matcher-reorgs). An x402 payment is recorded at one block, before
 * it is deep: it counts only once its block is.
 */
async function readPayoutsWithoutPayment(
  sql: Sql,
  depth: AttentionDepth,
  marks: AttentionMarks,
): Promise<number> {
  const indexed = await readIndexedBlock(sql, depth.chainId);
  if (indexed === null) return 0;
  const deepThrough = String(indexed - BigInt(depth.confirmations));
  // An x402 settlement a reorg dropped and the service settled again, or mined again elsewhere,
  // keeps its first transaction here until the settlement watcher follows the new one at depth
  // (watchSettlements.ts): until then it counts only once lost. Its transfer is found by the
  // authorization it carries (payer and nonce), whatever transaction carries it now.
  return readCount(sql<{ n: number }[]>`
    select count(distinct p.claim_id)::int as n
    from app.payouts p join app.payments m on m.claim_id = p.claim_id
    left join app.x402_payments x on x.claim_id = m.claim_id
    where p.status in ('signed', 'broadcast', 'confirmed')
      and p.claim_id in (
        select claim_id from app.payouts where nonce > ${marks.paymentsThrough}::int8
        union
        select held.claim_id from app.attention_held h
        join app.payouts held on held.nonce = ${heldNonce(sql)}
        where h.reason = 'payout_without_payment')
      and m.block_number <= ${deepThrough}
      and (m.matched_by <> 'x402' or m.verified_at is not null or x.status = 'lost')
      and not exists (
        select 1 from chain.incoming_transfer t
        where t."from" = m.from_address and t.value = m.value
          and t.block_number <= ${deepThrough}
          and (t.tx_hash = m.tx_hash
            or (m.authorization_nonce is not null
              and t.authorization_nonce = m.authorization_nonce)))`);
}

/**
 * Claims with more than one successful payout transfer on the chain, from the indexer's
 * outgoing transfers of the payout wallet (each matched to a claim by the attempt that is its
 * transaction). Read from the indexer, not from `app.payouts`: the table holds what the
 * service believes of each nonce, and a payout it abandoned or replaced is watched no more, so
 * its bytes mined late by a reorg (docs/operating.md#payout-reorgs) show only in the chain's
 * logs, which the indexer follows through reorgs.
 */
function readClaimsPaidTwice(sql: Sql, marks: AttentionMarks): Promise<number> {
  // Only a claim with a transfer read, or held, can have a second one.
  return readCount(sql<{ n: number }[]>`
    with candidates as (
      select a.claim_id from (${transfersToRead(sql, marks)}) o
      join app.payout_attempts a on a.tx_hash = o.tx_hash
      union
      select h.key from app.attention_held h where h.reason = 'claim_paid_twice')
    select count(*)::int as n from (
      select a.claim_id from candidates c
      join app.payout_attempts a on a.claim_id = c.claim_id
      join chain.outgoing_transfer o on o.tx_hash = a.tx_hash
      group by a.claim_id
      having count(distinct o.tx_hash) > 1) twice`);
}

/**
 * Final successful payouts none of whose attempts the indexer holds as a transfer from the
 * payout wallet: a reorg deeper than PAYOUT_CONFIRMATIONS mined the payout again as reverted
 * (its USDC drained first), or took it away and another transaction took its nonce. Past the
 * depth nothing is undone by itself, and neither the watch (final payouts) nor the revive (a
 * nonce the chain has passed) looks at it again: the claim shows completed and the payer was
 * not paid (docs/operating.md#payout-reorgs). The mirror of payout_without_payment. A payout
 * is final only once the indexer held its transfer, so a missing one is the chain's change.
 */
function readFinalPayoutsMissing(sql: Sql, marks: AttentionMarks): Promise<number> {
  return readCount(sql<{ n: number }[]>`
    select count(*)::int as n from (
      select nonce from app.payouts where nonce > ${marks.payoutsThrough}::int8
      union
      select ${heldNonce(sql)} from app.attention_held h
      where h.reason = 'payout_missing_on_chain') c
    join app.payouts p on p.nonce = c.nonce
    where p.status = 'confirmed' and p.final_at is not null
      and not exists (
        select 1 from app.payout_attempts a
        join chain.outgoing_transfer o on o.tx_hash = a.tx_hash
        where a.nonce = p.nonce)`);
}

async function readCount(query: Promise<{ n: number }[]>): Promise<number> {
  const [row] = await query;
  return row?.n ?? 0;
}
