import type { Database, Sql } from "../db/connect.ts";

/** Where the figures the database keeps differ from a fresh count of the ledger's entries. */
export interface LedgerFiguresCheck {
  /** Migration 0027's count has reached every claim: the readers use the kept figures. */
  kept: boolean;
  /** How far that count has gone (a claim id) while it has not finished. */
  countedTo: string | null;
  /** Each UTC day, or `all` for the distinct payout addresses of the totals, that differs. */
  drifted: { day: string; kept: string; fresh: string }[];
  /** Payout addresses whose entry counts, per day or over all days, differ. */
  driftedPayees: number;
  /**
   * Completed claims with a confirmed payout and no completed_at: no day to count them on, so
   * in no figure, kept or fresh (api/db/definitions/ledger_stats.sql). Only a hand edit makes one.
   */
  undated: number;
}

/**
 * The kept figures (api/db/definitions/ledger_stats.sql) against the entries counted afresh,
 * every day and every payout address: a figure that drifted is found here before a reader shows
 * it. Reads every completed payout: seconds at a year's size; for `pay-and-earn doctor` and the
 * tests, never a request. Before the count has finished, the figures hold only the claims it has
 * reached, so there is nothing to compare yet.
 *
 * Both comparisons read one snapshot (a read-only repeatable-read transaction): a change
 * committed between them cannot make them disagree. Its statements may take `statementTimeoutMs`
 * (two minutes by default), beyond the command's 15 s: at a year's size each reads every entry.
 */
export async function checkLedgerFigures(
  database: Database,
  { statementTimeoutMs = 120_000 } = {},
): Promise<LedgerFiguresCheck> {
  return database.begin("isolation level repeatable read read only", async (transaction) => {
    await transaction`select set_config('statement_timeout', ${String(statementTimeoutMs)}, true)`;
    return compareWithFreshCount(transaction);
  }) as Promise<LedgerFiguresCheck>;
}

async function compareWithFreshCount(sql: Sql): Promise<LedgerFiguresCheck> {
  const [state] = await sql<{ kept: boolean; counted_to: string | null }[]>`
    select finished_at is not null as kept, counted_to from app.ledger_backfill`;
  if (!state?.kept) {
    return {
      kept: false,
      countedTo: state?.counted_to ?? null,
      drifted: [],
      driftedPayees: 0,
      undated: 0,
    };
  }
  const drifted = await sql<{ day: string; kept: string; fresh: string }[]>`
    with entries as (
      select (c.completed_at at time zone 'UTC')::date as day, c.payout_address as address,
        coalesce(p.value, 0) as received, po.amount as paid_out
      from app.claims c
      join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
      left join app.payments p on p.claim_id = c.id
      where c.status = 'completed' and c.completed_at is not null
    ),
    fresh as (
      select day, count(*) as completed_payouts, count(distinct address) as addresses,
        sum(received) as received, sum(paid_out) as paid_out
      from entries group by day
    ),
    kept as (
      select day, completed_payouts, unique_payout_addresses as addresses, received, paid_out
      from app.ledger_days
      where (completed_payouts, unique_payout_addresses, received, paid_out) <> (0, 0, 0, 0)
    )
    select coalesce(f.day, k.day)::text as day,
      concat_ws(' ', k.completed_payouts, k.addresses, k.received, k.paid_out) as kept,
      concat_ws(' ', f.completed_payouts, f.addresses, f.received, f.paid_out) as fresh
    from fresh f full join kept k on k.day = f.day
    where (f.completed_payouts, f.addresses, f.received, f.paid_out)
      is distinct from (k.completed_payouts, k.addresses, k.received, k.paid_out)
    union all
    select 'all', t.unique_payout_addresses::text, (select count(distinct address) from entries)::text
    from app.ledger_totals t
    where t.unique_payout_addresses <> (select count(distinct address) from entries)
    order by 1`;
  const [payees] = await sql<{ drifted: string }[]>`
    with entries as (
      select (c.completed_at at time zone 'UTC')::date as day, c.payout_address as address
      from app.claims c
      join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
      where c.status = 'completed' and c.completed_at is not null
    ),
    fresh_day as (select day, address, count(*) as entries from entries group by 1, 2),
    fresh_all as (select address, count(*) as entries from entries group by 1)
    select (
      (select count(*) from fresh_day f
        full join app.ledger_day_payees k on k.day = f.day and k.payout_address = f.address
        where f.entries is distinct from k.entries)
      + (select count(*) from fresh_all f
        full join app.ledger_payees k on k.payout_address = f.address
        where f.entries is distinct from k.entries)
    )::text as drifted`;
  const [undated] = await sql<{ claims: string }[]>`
    select count(*)::text as claims from app.claims c
    where c.status = 'completed' and c.completed_at is null
      and exists (select 1 from app.payouts po where po.claim_id = c.id and po.status = 'confirmed')`;
  return {
    kept: true,
    countedTo: state.counted_to,
    drifted: [...drifted],
    driftedPayees: Number(payees?.drifted ?? 0),
    undated: Number(undated?.claims ?? 0),
  };
}
