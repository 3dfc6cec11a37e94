import type { Sql } from "../db/connect.ts";

/**
 * Figures over completed claims only: what the service received for them and paid out.
 * Payments still on their way and transfers that paid nothing (below the price, unmatched)
 * are not counted: the ledger is about finished trades.
 */
export interface LedgerTotals {
  completedPayouts: number;
  uniquePayoutAddresses: number;
  /** Atomic USDC. */
  received: bigint;
  /** Atomic USDC. */
  paidOut: bigint;
  firstCompletedAt: Date | null;
  lastCompletedAt: Date | null;
}

export interface LedgerDay extends Omit<LedgerTotals, "firstCompletedAt" | "lastCompletedAt"> {
  /** The UTC day, `YYYY-MM-DD`. */
  day: string;
}

export const MAX_LEDGER_DAYS = 366;

interface TotalsRow {
  completed_payouts: bigint;
  unique_payout_addresses: bigint;
  received: string;
  paid_out: string;
}

export async function readLedgerTotals(sql: Sql): Promise<LedgerTotals> {
  const [row] = await sql<
    (TotalsRow & { first_completed_at: Date | null; last_completed_at: Date | null })[]
  >`
    select count(*) as completed_payouts,
      count(distinct c.payout_address) as unique_payout_addresses,
      coalesce(sum(p.value), 0) as received,
      coalesce(sum(po.amount), 0) as paid_out,
      min(c.completed_at) as first_completed_at,
      max(c.completed_at) as last_completed_at
    from app.claims c
    join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    left join app.payments p on p.claim_id = c.id
    where c.status = 'completed'`;
  if (!row) throw new Error("An aggregate query returned no row");
  return {
    ...totalsOf(row),
    firstCompletedAt: row.first_completed_at,
    lastCompletedAt: row.last_completed_at,
  };
}

/** The last `days` UTC days up to today, oldest first, days without payouts included as zeros. */
export async function readLedgerDaily(sql: Sql, days: number): Promise<LedgerDay[]> {
  if (!Number.isInteger(days) || days < 1 || days > MAX_LEDGER_DAYS) {
    throw new RangeError(`days must be a whole number from 1 to ${MAX_LEDGER_DAYS}`);
  }
  const rows = await sql<(TotalsRow & { day: string })[]>`
    with days as (
      select day::date as day
      from generate_series(
        (now() at time zone 'UTC')::date - ${days - 1}::int,
        (now() at time zone 'UTC')::date,
        interval '1 day'
      ) as day
    )
    select to_char(d.day, 'YYYY-MM-DD') as day,
      count(c.id) as completed_payouts,
      count(distinct c.payout_address) as unique_payout_addresses,
      coalesce(sum(p.value), 0) as received,
      coalesce(sum(po.amount), 0) as paid_out
    from days d
    left join app.claims c on c.status = 'completed'
      and c.completed_at >= d.day::timestamp at time zone 'UTC'
      and c.completed_at < (d.day + 1)::timestamp at time zone 'UTC'
    left join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    left join app.payments p on p.claim_id = c.id
    group by d.day
    order by d.day`;
  return rows.map((row) => ({ day: row.day, ...totalsOf(row) }));
}

function totalsOf(row: TotalsRow) {
  return {
    completedPayouts: Number(row.completed_payouts),
    uniquePayoutAddresses: Number(row.unique_payout_addresses),
    received: BigInt(row.received),
    paidOut: BigInt(row.paid_out),
  };
}
