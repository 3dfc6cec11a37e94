import type { PendingQuery, Row } from "postgres";
import { pinIndexerViews, readIndexerTables } from "../chain/indexerSchema.ts";
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
  indexer_tables: string;
  block: string;
  log: number;
  payouts: string | null;
  confirmations: number;
  payments: string | null;
}

/**
 * The marks the counts may use, in a transaction that pinned the `chain` views (`indexer`, from
 * readIndexerTables, names what they show): none when they were set on another index of the chain
 * (a re-index), and none for payout_without_payment when they were set with another CONFIRMATIONS.
 */
export async function readAttentionMarks(
  sql: Sql,
  depth: AttentionDepth,
  indexer: string | null,
): Promise<AttentionMarks> {
  const [mark] = await readMark(sql);
  if (!mark || indexer === null || mark.indexer_tables !== indexer) return NOTHING_CHECKED;
  return {
    transfersThrough: { block: mark.block, log: mark.log },
    payoutsThrough: mark.payouts ?? BELOW_EVERY_NONCE,
    paymentsThrough:
      mark.confirmations === depth.confirmations
        ? (mark.payments ?? BELOW_EVERY_NONCE)
        : BELOW_EVERY_NONCE,
  };
}

const MARK_COLUMNS = (sql: Sql) => sql`indexer_tables, transfers_through_block::text as block,
  transfers_through_log as log, payouts_through_nonce::text as payouts,
  payments_confirmations as confirmations, payments_through_nonce::text as payments`;

function readMark(sql: Sql, lock = false) {
  return sql<MarkRow[]>`
    select ${MARK_COLUMNS(sql)} from app.attention_checked ${lock ? sql`for update` : sql``}`;
}

/**
 * A held payout's nonce, for `h` a row of app.attention_held; null for the other reasons, whose
 * keys are no integers, whatever order the planner evaluates the conditions around it in.
 */
export function heldNonce(sql: Sql): Fragment {
  return sql`(case when h.reason in ('payout_missing_on_chain', 'payout_without_payment')
    then h.key::int8 end)`;
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
      const step = await checkAttentionThrough(
        deps.sql,
        { chainId: deps.config.chain.chainId, confirmations: deps.config.chain.confirmations },
        pace,
      );
      // At once again only when a mark moved: a batch of payouts none of which is final yet
      // moves nothing, and is looked at again after the interval.
      return step.moved && !step.caughtUp;
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
): Promise<{ caughtUp: boolean; moved: boolean }> {
  return sql.begin(async (tx) => {
    const indexer = (await pinIndexerViews(tx)) ? await readIndexerTables(tx) : null;
    if (!indexer) return { caughtUp: true, moved: false };
    const [checkpoint] = await tx<{ finalized: string }[]>`
      select substring(finalized_checkpoint from 27 for 16)::int8::text as finalized
      from chain._ponder_checkpoint where chain_id = ${depth.chainId}`;
    if (!checkpoint) return { caughtUp: true, moved: false };
    const finalized = checkpoint.finalized;
    // A payment's transfer at or below this is at depth for every later read: the indexer's block
    // never falls below its finalized one.
    const deepForGood = String(BigInt(finalized) - BigInt(depth.confirmations));

    let [mark] = await readMark(tx, true);
    // Start again, on another index of the chain every mark; on another CONFIRMATIONS the
    // payments' mark alone (the others do not depend on it). The held rows stay: a read with the
    // old marks may still use them, and a held row is read again, never trusted.
    if (!mark || mark.indexer_tables !== indexer) {
      [mark] = await tx<MarkRow[]>`
        insert into app.attention_checked as c (indexer_tables, transfers_through_block,
          transfers_through_log, payouts_through_nonce, payments_confirmations,
          payments_through_nonce)
        values (${indexer}, -1, -1, null, ${depth.confirmations}, null)
        on conflict (only_row) do update set indexer_tables = excluded.indexer_tables,
          transfers_through_block = -1, transfers_through_log = -1, payouts_through_nonce = null,
          payments_confirmations = excluded.payments_confirmations, payments_through_nonce = null,
          checked_at = now()
        returning ${MARK_COLUMNS(tx)}`;
    } else if (mark.confirmations !== depth.confirmations) {
      [mark] = await tx<MarkRow[]>`
        update app.attention_checked
        set payments_confirmations = ${depth.confirmations}, payments_through_nonce = null
        returning ${MARK_COLUMNS(tx)}`;
    }
    if (!mark) throw new Error("app.attention_checked has no row");

    const transfers = await passTransfers(tx, mark, finalized, pace.batchSize);
    const payouts = await passPayouts(
      tx,
      "payout_missing_on_chain",
      mark.payouts,
      pace.batchSize,
      (nonce) => onChainForGood(tx, nonce, finalized),
    );
    const payments = await passPayouts(
      tx,
      "payout_without_payment",
      mark.payments,
      pace.batchSize,
      (nonce) => paymentForGood(tx, nonce, deepForGood),
    );
    await tx`
      delete from app.attention_held h
      where case h.reason
        when 'payout_missing_on_chain' then ${onChainForGood(tx, heldNonce(tx), finalized)}
        when 'payout_without_payment' then ${paymentForGood(tx, heldNonce(tx), deepForGood)}
        else false end`;
    await tx`
      update app.attention_checked
      set transfers_through_block = ${transfers.block}, transfers_through_log = ${transfers.log},
        payouts_through_nonce = ${payouts.nonce}, payments_through_nonce = ${payments.nonce},
        checked_at = now()`;
    return {
      caughtUp: transfers.caughtUp && payouts.caughtUp && payments.caughtUp,
      moved:
        transfers.block !== mark.block ||
        transfers.log !== mark.log ||
        payouts.nonce !== mark.payouts ||
        payments.nonce !== mark.payments,
    };
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
 * The next payouts after `from` up to the highest final one among them, for `reason`: each is held
 * unless `settled` (its nonce can never count for the reason again).
 */
async function passPayouts(
  sql: Sql,
  reason: "payout_missing_on_chain" | "payout_without_payment",
  from: string | null,
  batchSize: number,
  settled: (nonce: Fragment) => Fragment,
) {
  const [row] = await sql<{ rows: number; through: string | null }[]>`
    with batch as (
      select p.nonce, p.final_at from app.payouts p
      where p.nonce > ${from ?? BELOW_EVERY_NONCE}::int8
      order by p.nonce
      limit ${batchSize}),
    through as (select max(nonce) as nonce from batch where final_at is not null),
    passed as (select b.nonce from batch b, through t where b.nonce <= t.nonce),
    held as (
      insert into app.attention_held (reason, key)
      select ${reason}::text, passed.nonce::text from passed
      where not ${settled(sql`passed.nonce`)}
      on conflict do nothing)
    select (select count(*)::int from batch) as rows, (select nonce::text from through) as through`;
  return {
    nonce: row?.through ?? from,
    caughtUp: (row?.rows ?? 0) < batchSize,
  };
}
