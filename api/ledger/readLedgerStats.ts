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

/**
 * Whether the figures the database keeps hold every claim: migration 0027's count has reached
 * them all (docs/operating.md#migrations-at-size). Until then the readers count afresh, slower
 * but right.
 */
export async function ledgerFiguresKept(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ kept: boolean }[]>`
    select finished_at is not null as kept from app.ledger_backfill`;
  return row?.kept === true;
}

/**
 * Read from the figures the database keeps as entries come and go (api/db/definitions/
 * ledger_stats.sql): a few rows whatever the ledger's length; the first and last completions
 * from the ends of the ledger's own index.
 */
export async function readLedgerTotals(sql: Sql): Promise<LedgerTotals> {
  if (!(await ledgerFiguresKept(sql))) return aggregateLedgerTotals(sql);
  const [row] = await sql<TotalsWithSpanRow[]>`
    select coalesce(sum(d.completed_payouts), 0)::int8 as completed_payouts,
      coalesce((select t.unique_payout_addresses from app.ledger_totals t), 0)::int8
        as unique_payout_addresses,
      coalesce(sum(d.received), 0) as received,
      coalesce(sum(d.paid_out), 0) as paid_out,
      (select c.completed_at from app.claims c
        where c.status = 'completed' and c.completed_at is not null
          and exists (select 1 from app.payouts po
            where po.claim_id = c.id and po.status = 'confirmed')
        order by c.completed_at limit 1) as first_completed_at,
      (select c.completed_at from app.claims c
        where c.status = 'completed' and c.completed_at is not null
          and exists (select 1 from app.payouts po
            where po.claim_id = c.id and po.status = 'confirmed')
        order by c.completed_at desc limit 1) as last_completed_at
    from app.ledger_days d`;
  return totalsWithSpan(row);
}

/** The last `days` UTC days up to today, oldest first, days without payouts included as zeros. */
export async function readLedgerDaily(sql: Sql, days: number): Promise<LedgerDay[]> {
  checkLedgerDays(days);
  if (!(await ledgerFiguresKept(sql))) return aggregateLedgerDaily(sql, days);
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
      coalesce(l.completed_payouts, 0) as completed_payouts,
      coalesce(l.unique_payout_addresses, 0) as unique_payout_addresses,
      coalesce(l.received, 0) as received,
      coalesce(l.paid_out, 0) as paid_out
    from days d
    left join app.ledger_days l on l.day = d.day
    order by d.day`;
  return rows.map((row) => ({ day: row.day, ...totalsOf(row) }));
}

function checkLedgerDays(days: number): void {
  if (!Number.isInteger(days) || days < 1 || days > MAX_LEDGER_DAYS) {
    throw new RangeError(`days must be a whole number from 1 to ${MAX_LEDGER_DAYS}`);
  }
}

type TotalsWithSpanRow = TotalsRow & {
  first_completed_at: Date | null;
  last_completed_at: Date | null;
};

/** The totals and the first and last completion, kept or counted afresh alike. */
function totalsWithSpan(row: TotalsWithSpanRow | undefined) {
  if (!row) throw new Error("An aggregate query returned no row");
  return {
    ...totalsOf(row),
    firstCompletedAt: row.first_completed_at,
    lastCompletedAt: row.last_completed_at,
  };
}

function totalsOf(row: TotalsRow) {
  return {
    completedPayouts: Number(row.completed_payouts),
    uniquePayoutAddresses: Number(row.unique_payout_addresses),
    received: BigInt(row.received),
    paidOut: BigInt(row.paid_out),
  };
}

/**
 * The ledger's figures counted afresh from every entry (a completed claim with its confirmed
 * payout; one without a completed_at has no day and is no entry: api/db/definitions/
 * ledger_stats.sql), as they were read before the database kept them: what the readers answer until
 * migration 0027's count has reached every claim, and what `pay-and-earn doctor` and the tests
 * compare the kept figures with. Seconds at a year's size (BENCHMARKS.md#a-year-of-traffic).
 */
export async function aggregateLedgerTotals(sql: Sql): Promise<LedgerTotals> {
  const [row] = await sql<TotalsWithSpanRow[]>`
    select count(*) as completed_payouts,
      count(distinct c.payout_address) as unique_payout_addresses,
      coalesce(sum(p.value), 0) as received,
      coalesce(sum(po.amount), 0) as paid_out,
      min(c.completed_at) as first_completed_at,
      max(c.completed_at) as last_completed_at
    from app.claims c
    join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    left join app.payments p on p.claim_id = c.id
    where c.status = 'completed' and c.completed_at is not null`;
  return totalsWithSpan(row);
}

/** The last `days` UTC days counted afresh, as readLedgerDaily answers them. */
export async function aggregateLedgerDaily(sql: Sql, days: number): Promise<LedgerDay[]> {
  checkLedgerDays(days);
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
    left join (app.claims c join app.payouts po on po.claim_id = c.id and po.status = 'confirmed')
      on c.status = 'completed'
      and c.completed_at >= d.day::timestamp at time zone 'UTC'
      and c.completed_at < (d.day + 1)::timestamp at time zone 'UTC'
    left join app.payments p on p.claim_id = c.id
    group by d.day
    order by d.day`;
  return rows.map((row) => ({ day: row.day, ...totalsOf(row) }));
}
