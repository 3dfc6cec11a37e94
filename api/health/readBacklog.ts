import type { Sql } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";

/** Confirmed incoming transfers the matcher has not taken up yet. */
export interface MatcherBacklog {
  /** The matcher's cursor: the block of the last transfer it processed (null: none yet). */
  cursorBlock: number | null;
  waitingTransfers: number;
  /** Confirmed blocks from the oldest waiting transfer to the newest confirmed block; 0 when none waits. */
  lagBlocks: number;
  /** Seconds since the oldest waiting transfer was mined; null when none waits. */
  oldestWaitingSeconds: number | null;
  /** Seconds since the RPC last cut a block's logs short (see TransferVerifier); null: never. */
  logsShortSecondsAgo: number | null;
}

/** Claims waiting for their payout, and payouts waiting to be mined. */
export interface PayoutBacklog {
  /** Claims in `paid`: no payout signed yet. */
  claimsPaid: number;
  oldestPaidSeconds: number | null;
  /** Payouts signed or broadcast, not confirmed yet. */
  payoutsUnfinished: number;
  oldestUnfinishedSeconds: number | null;
}

/**
 * The matcher's backlog: transfers after its cursor up to `confirmedThrough`, the newest block
 * whose transfers have their confirmations and are indexed. Null until the indexer has
 * created its views.
 */
export async function readMatcherBacklog(
  sql: Sql,
  confirmedThrough: bigint,
): Promise<MatcherBacklog | null> {
  try {
    const [row] = await sql<
      {
        cursor_block: bigint;
        waiting: number;
        oldest_block: bigint | null;
        oldest_age: number | null;
        logs_short_age: number | null;
      }[]
    >`
      select cursor.block_number as cursor_block,
        extract(epoch from now() - cursor.logs_short_at)::float8 as logs_short_age,
        count(transfer.tx_hash)::int as waiting,
        min(transfer.block_number)::int8 as oldest_block,
        extract(epoch from now())::float8 - min(transfer.block_timestamp)::float8 as oldest_age
      from app.matcher_cursor cursor
      left join chain.incoming_transfer transfer
        on (transfer.block_number, transfer.log_index)
            > (cursor.block_number::numeric, cursor.log_index)
          and transfer.block_number <= ${String(confirmedThrough)}::numeric
      group by cursor.block_number, cursor.logs_short_at`;
    if (!row) return null;
    return {
      cursorBlock: row.cursor_block >= 0n ? Number(row.cursor_block) : null,
      waitingTransfers: row.waiting,
      lagBlocks: row.oldest_block === null ? 0 : Number(confirmedThrough - row.oldest_block) + 1,
      oldestWaitingSeconds: row.oldest_age === null ? null : wholeSeconds(row.oldest_age),
      logsShortSecondsAgo: row.logs_short_age === null ? null : wholeSeconds(row.logs_short_age),
    };
  } catch (error) {
    if (hasSqlState(error, SQL_STATE.undefinedTable)) return null;
    throw error;
  }
}

export async function readPayoutBacklog(sql: Sql): Promise<PayoutBacklog> {
  const [row] = await sql<
    {
      claims_paid: number;
      oldest_paid: number | null;
      unfinished: number;
      oldest_unfinished: number | null;
    }[]
  >`
    select paid.claims_paid, paid.oldest_paid, unfinished.unfinished, unfinished.oldest_unfinished
    from (
      select count(*)::int as claims_paid,
        extract(epoch from now() - min(coalesce(paid_at, created_at)))::float8 as oldest_paid
      from app.claims where status = 'paid'
    ) paid, (
      select count(*)::int as unfinished,
        extract(epoch from now() - min(created_at))::float8 as oldest_unfinished
      from app.payouts where status in ('signed', 'broadcast')
    ) unfinished`;
  return {
    claimsPaid: row?.claims_paid ?? 0,
    oldestPaidSeconds: row?.oldest_paid == null ? null : wholeSeconds(row.oldest_paid),
    payoutsUnfinished: row?.unfinished ?? 0,
    oldestUnfinishedSeconds:
      row?.oldest_unfinished == null ? null : wholeSeconds(row.oldest_unfinished),
  };
}

/** Block timestamps can run ahead of the database's clock (a devnet, a warped chain). */
function wholeSeconds(seconds: number): number {
  return Math.max(0, Math.floor(seconds));
}
