import type { PendingQuery, Row } from "postgres";
import { readIndexerSchema } from "../chain/indexerSchema.ts";
import type { Database, Sql } from "../db/connect.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import type { AttentionDepth } from "./readAttention.ts";

/**
 * Where the attention counts start reading (app.attention_checked): rows behind a mark were
 * found settled for good, or are held in app.attention_held and read again every time
 * (docs/operating.md#attention-checked-through).
 */
export interface AttentionMarks {
  /** The indexer's outgoing transfers after this position (block, log index). */
  transfersThrough: { block: string; log: number };
  /** Payouts above this nonce, for payout_missing_on_chain. */
  payoutsThrough: string;
  /** Payouts above this nonce, for payout_without_payment (its depth is CONFIRMATIONS'). */
  paymentsThrough: string;
}

/** Below every nonce (the smallest int8): every payout is read. */
const BELOW_EVERY_NONCE = "-9223372036854775808";

/** Nothing checked yet: every row is read, as the counts always did. */
export const NOTHING_CHECKED: AttentionMarks = {
  transfersThrough: { block: "-1", log: -1 },
  payoutsThrough: BELOW_EVERY_NONCE,
  paymentsThrough: BELOW_EVERY_NONCE,
};

/** The highest log index: a mark at (block, this) has passed the whole block. */
const WHOLE_BLOCK = 2_147_483_647;

interface MarkRow {
  indexer_schema: string;
  confirmations: number;
  block: string;
  log: number;
  nonce: string | null;
}

/**
 * The marks the counts may use: none when they were set on another indexer schema (a re-index)
 * and none for payout_without_payment when they were set with another CONFIRMATIONS.
 */
export async function readAttentionMarks(sql: Sql, depth: AttentionDepth): Promise<AttentionMarks> {
  const [[mark], schema] = await Promise.all([readMark(sql), readIndexerSchema(sql)]);
  if (!mark || mark.indexer_schema !== schema) return NOTHING_CHECKED;
  const payoutsThrough = mark.nonce ?? BELOW_EVERY_NONCE;
  return {
    transfersThrough: { block: mark.block, log: mark.log },
    payoutsThrough,
    paymentsThrough:
      mark.confirmations === depth.confirmations ? payoutsThrough : BELOW_EVERY_NONCE,
  };
}

function readMark(sql: Sql, lock = false) {
  return sql<MarkRow[]>`
    select indexer_schema, confirmations, transfers_through_block::text as block,
      transfers_through_log as log, payouts_through_nonce::text as nonce
    from app.attention_checked ${lock ? sql`for update` : sql``}`;
}

export interface AttentionCheckPace {
  /** Outgoing transfers, and payouts, looked at per tick (one transaction). */
  batchSize: number;
}

/** 5,000 of each a tick: tens of milliseconds of index lookups at a year's size. */
const PACE: AttentionCheckPace = { batchSize: 5_000 };

/** While caught up: new rows become final (and can be passed) a block or so at a time. */
const CAUGHT_UP_INTERVAL_MS = 10_000;

/**
 * Moves the attention counts' marks on (app.attention_checked), so health reads only what can
 * still need attention (docs/operating.md#attention-checked-through). One replica, under its lock.
 */
export function createAttentionCheckWorker(
  deps: Pick<ServiceDeps, "sql" | "config">,
  pace: AttentionCheckPace = PACE,
): Worker {
  return {
    name: "attention-check",
    lockKey: LOCK_KEYS.attentionCheck,
    intervalMs: CAUGHT_UP_INTERVAL_MS,
    tick: async () => {
      const { caughtUp } = await checkAttentionThrough(
        deps.sql,
        { chainId: deps.config.chain.chainId, confirmations: deps.config.chain.confirmations },
        pace,
      );
      return !caughtUp;
    },
  };
}

/**
 * One step: the next outgoing transfers and payouts at or below the indexer's finalized block are
 * passed, each either settled for good or held, and the held payouts settled since are let go.
 * Settled for good means no later change can make it count (docs/operating.md#attention-checked-through):
 * - a transfer at or below the finalized block never changes (Ponder never rewrites one; a reorg
 *   deeper stops it), and a payout attempt is never deleted;
 * - a payout is passed only up to the highest final one: every lower nonce was mined long ago,
 *   after its payout's row was committed, and a new payout takes a nonce above every stored one.
 */
export async function checkAttentionThrough(
  sql: Database,
  depth: AttentionDepth,
  pace: AttentionCheckPace = PACE,
): Promise<{ caughtUp: boolean }> {
  return sql.begin(async (tx) => {
    const schema = await readIndexerSchema(tx);
    if (!schema) return { caughtUp: true };
    const [checkpoint] = await tx<{ finalized: string }[]>`
      select substring(finalized_checkpoint from 27 for 16)::int8::text as finalized
      from chain._ponder_checkpoint where chain_id = ${depth.chainId}`;
    if (!checkpoint) return { caughtUp: true };
    const finalized = checkpoint.finalized;
    // A payment's transfer at or below this is at depth for every later read: the indexer's block
    // never falls below its finalized one.
    const deepForGood = String(BigInt(finalized) - BigInt(depth.confirmations));

    let [mark] = await readMark(tx, true);
    if (!mark || mark.indexer_schema !== schema || mark.confirmations !== depth.confirmations) {
      // Start again. The held rows stay: a read with the old marks may still use them, and a
      // held row is read again, never trusted.
      [mark] = await tx<MarkRow[]>`
        insert into app.attention_checked as c (indexer_schema, confirmations,
          transfers_through_block, transfers_through_log, payouts_through_nonce)
        values (${schema}, ${depth.confirmations}, -1, -1, null)
        on conflict (only_row) do update set indexer_schema = excluded.indexer_schema,
          confirmations = excluded.confirmations, transfers_through_block = -1,
          transfers_through_log = -1, payouts_through_nonce = null, checked_at = now()
        returning indexer_schema, confirmations, transfers_through_block::text as block,
          transfers_through_log as log, payouts_through_nonce::text as nonce`;
    }
    if (!mark) throw new Error("app.attention_checked has no row");

    const transfers = await passTransfers(tx, mark, finalized, pace.batchSize);
    const payouts = await passPayouts(tx, mark, finalized, deepForGood, pace.batchSize);
    await tx`
      delete from app.attention_held h
      where (h.reason = 'payout_missing_on_chain'
          and ${onChainForGood(tx, tx`h.key::int8`, finalized)})
        or (h.reason = 'payout_without_payment'
          and ${paymentForGood(tx, tx`h.key::int8`, deepForGood)})`;
    await tx`
      update app.attention_checked
      set transfers_through_block = ${transfers.block}, transfers_through_log = ${transfers.log},
        payouts_through_nonce = ${payouts.nonce}, checked_at = now()`;
    return { caughtUp: transfers.caughtUp && payouts.caughtUp };
  });
}

type Fragment = PendingQuery<Row[]>;

/** The nonce's payout has a transfer the indexer holds for good: it can never be missing. */
function onChainForGood(sql: Sql, nonce: Fragment, finalized: string): Fragment {
  return sql`exists (
    select 1 from app.payout_attempts a join chain.outgoing_transfer o on o.tx_hash = a.tx_hash
    where a.nonce = ${nonce} and o.block_number <= ${finalized}::numeric)`;
}

/**
 * The claim of the nonce's payout has its payment at depth for good: a transfer the indexer holds
 * for good, found by what of the payment never changes (sender, value, and its authorization, or
 * for a payment that is no x402 settlement and carries none, its transaction; an x402 payment's
 * transaction follows a settlement that moved).
 */
function paymentForGood(sql: Sql, nonce: Fragment, deepForGood: string): Fragment {
  return sql`exists (
    select 1 from app.payouts its_payout
    join app.payments m on m.claim_id = its_payout.claim_id
    join chain.incoming_transfer t on t."from" = m.from_address and t.value = m.value
      and t.block_number <= ${deepForGood}::numeric
      and ((m.authorization_nonce is not null and t.authorization_nonce = m.authorization_nonce)
        or (m.authorization_nonce is null and m.matched_by <> 'x402' and t.tx_hash = m.tx_hash))
    where its_payout.nonce = ${nonce})`;
}

/**
 * The next outgoing transfers at or below the finalized block: those that are none of our
 * attempts are held (payout_wallet_foreign_transfer), and so is each claim that already has two
 * such transfers for good (claim_paid_twice). A claim's later transfer comes after the mark, where
 * the counts read it.
 */
async function passTransfers(sql: Sql, mark: MarkRow, finalized: string, batchSize: number) {
  const [row] = await sql<{ rows: number; block: string | null; log: number | null }[]>`
    with batch as (
      select o.tx_hash, o.log_index, o.block_number from chain.outgoing_transfer o
      where (o.block_number, o.log_index) > (${mark.block}::numeric, ${mark.log}::int)
        and o.block_number <= ${finalized}::numeric
      order by o.block_number, o.log_index
      limit ${batchSize}),
    held_foreign as (
      insert into app.attention_held (reason, key)
      select 'payout_wallet_foreign_transfer', b.tx_hash || ':' || b.log_index from batch b
      where not exists (select 1 from app.payout_attempts a where a.tx_hash = b.tx_hash)
      on conflict do nothing),
    held_twice as (
      insert into app.attention_held (reason, key)
      select distinct 'claim_paid_twice'::text, a.claim_id
      from batch b join app.payout_attempts a on a.tx_hash = b.tx_hash
      where (select count(distinct o.tx_hash) from app.payout_attempts other
          join chain.outgoing_transfer o on o.tx_hash = other.tx_hash
          where other.claim_id = a.claim_id and o.block_number <= ${finalized}::numeric) > 1
      on conflict do nothing),
    last as (
      select block_number, log_index from batch order by block_number desc, log_index desc limit 1)
    select (select count(*)::int from batch) as rows,
      (select block_number::text from last) as block, (select log_index from last) as log`;
  const rows = row?.rows ?? 0;
  if (rows < batchSize && BigInt(finalized) >= BigInt(mark.block)) {
    // Every transfer at or below the finalized block is passed, and none can come there later.
    return { block: finalized, log: WHOLE_BLOCK, caughtUp: true };
  }
  return {
    block: row?.block ?? mark.block,
    log: row?.log ?? mark.log,
    caughtUp: rows < batchSize,
  };
}

/**
 * The next payouts up to the highest final one among them: each is held for
 * payout_missing_on_chain unless its nonce has a transfer the indexer holds for good, and for
 * payout_without_payment unless its claim's payment has one at depth for good.
 */
async function passPayouts(
  sql: Sql,
  mark: MarkRow,
  finalized: string,
  deepForGood: string,
  batchSize: number,
) {
  const [row] = await sql<{ rows: number; through: string | null }[]>`
    with batch as (
      select p.nonce, p.final_at from app.payouts p
      where p.nonce > ${mark.nonce ?? BELOW_EVERY_NONCE}::int8
      order by p.nonce
      limit ${batchSize}),
    through as (select max(nonce) as nonce from batch where final_at is not null),
    passed as (select b.nonce from batch b, through t where b.nonce <= t.nonce),
    held_missing as (
      insert into app.attention_held (reason, key)
      select 'payout_missing_on_chain', passed.nonce::text from passed
      where not ${onChainForGood(sql, sql`passed.nonce`, finalized)}
      on conflict do nothing),
    held_unpaid as (
      insert into app.attention_held (reason, key)
      select 'payout_without_payment', passed.nonce::text from passed
      where not ${paymentForGood(sql, sql`passed.nonce`, deepForGood)}
      on conflict do nothing)
    select (select count(*)::int from batch) as rows, (select nonce::text from through) as through`;
  return {
    nonce: row?.through ?? mark.nonce,
    caughtUp: (row?.rows ?? 0) < batchSize,
  };
}
