import { expect } from "vitest";
import { connectDatabase, type Database, type Sql } from "../../api/db/connect.ts";
import { checkLedgerFigures } from "../../api/ledger/checkLedgerFigures.ts";
import {
  ledgerFiguresKept,
  readLedgerDaily,
  readLedgerTotals,
} from "../../api/ledger/readLedgerStats.ts";

/**
 * The ledger's kept figures (api/db/definitions/ledger_stats.sql) against a fresh count, and
 * claims, payments and payouts written straight, as each owner writes them, for
 * ledgerStats.test.ts and ledgerCount.test.ts.
 */

/**
 * The figures aggregated from scratch: the read the kept figures replace. An entry is a completed
 * claim, with its completed_at, and a confirmed payout, per day as in all (the per-day read counted a completed claim
 * whose payout a reorg had taken away; the totals did not).
 */
async function freshFigures(sql: Sql) {
  const [totals] = await sql<Record<string, string | null>[]>`
    select count(*)::text as completed, count(distinct c.payout_address)::text as addresses,
      coalesce(sum(p.value), 0)::text as received, coalesce(sum(po.amount), 0)::text as paid_out,
      date_trunc('milliseconds', min(c.completed_at))::text as first,
      date_trunc('milliseconds', max(c.completed_at))::text as last
    from app.claims c
    join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    left join app.payments p on p.claim_id = c.id
    where c.status = 'completed' and c.completed_at is not null`;
  const daily = await sql<{ day: string; completed: string; addresses: string }[]>`
    select to_char(d.day, 'YYYY-MM-DD') as day, count(c.id)::text as completed,
      count(distinct c.payout_address)::text as addresses,
      coalesce(sum(p.value), 0)::text as received, coalesce(sum(po.amount), 0)::text as paid_out
    from generate_series((now() at time zone 'UTC')::date - 2, (now() at time zone 'UTC')::date,
      interval '1 day') as d(day)
    left join (app.claims c join app.payouts po on po.claim_id = c.id and po.status = 'confirmed')
      on c.status = 'completed'
      and c.completed_at >= d.day::date::timestamp at time zone 'UTC'
      and c.completed_at < (d.day::date + 1)::timestamp at time zone 'UTC'
    left join app.payments p on p.claim_id = c.id
    group by d.day order by d.day`;
  return { totals, daily };
}

export async function keptFigures(sql: Sql) {
  const totals = await readLedgerTotals(sql);
  const daily = await readLedgerDaily(sql, 3);
  const at = async (date: Date | null) =>
    date === null
      ? null
      : ((await sql<{ t: string }[]>`select ${date}::timestamptz::text as t`)[0]?.t ?? null);
  return {
    totals: {
      completed: String(totals.completedPayouts),
      addresses: String(totals.uniquePayoutAddresses),
      received: String(totals.received),
      paid_out: String(totals.paidOut),
      first: await at(totals.firstCompletedAt),
      last: await at(totals.lastCompletedAt),
    },
    daily: daily.map((day) => ({
      day: day.day,
      completed: String(day.completedPayouts),
      addresses: String(day.uniquePayoutAddresses),
      received: String(day.received),
      paid_out: String(day.paidOut),
    })),
  };
}

/**
 * The kept figures, as the ledger reads them, equal to a fresh count; and every day and payout
 * address too (checkLedgerFigures, doctor's check). Returns the totals.
 */
export async function expectKeptAsFresh(sql: Database) {
  expect(await ledgerFiguresKept(sql)).toBe(true);
  const [now, fromScratch] = [await keptFigures(sql), await freshFigures(sql)];
  expect(now).toEqual(fromScratch);
  // Every day and every payout address, not only the three days the reads above show.
  expect(await checkLedgerFigures(sql)).toMatchObject({
    kept: true,
    drifted: [],
    driftedPayees: 0,
  });
  return now.totals;
}

let nonce = 0;
/** A claim paying its payout, with its payment (value) and a signed payout. */
export async function payingClaim(sql: Sql, id: string, address: string, value: number) {
  nonce += 1;
  const hex = nonce.toString(16).padStart(64, "0");
  await sql`
    insert into app.claims (id, flow, payout_address, amount_due, status, expires_at, paid_at)
    values (${id}, 'claim', ${address}, ${value}, 'paying', now() + interval '7 days', now())`;
  await sql`
    insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
      from_address, value, matched_by)
    values (${`0x${hex}`}, 0, ${id}, 1, ${`0x${hex}`}, ${address}, ${value}, 'sender')`;
  await sql`
    insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status)
    values (${id}, ${address}, 1000000, ${nonce}, ${`0x${hex}`}, '0x00', 'broadcast')`;
}

/** `count` claims paying their payouts, over `addresses` payout addresses. */
export async function payingClaims(
  sql: Sql,
  prefix: string,
  count: number,
  addresses: number,
): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const id = `${prefix}_${String(index).padStart(3, "0")}`;
    const address = `0x${(index % addresses).toString(16).padStart(2, "0").padEnd(40, "e")}`;
    await payingClaim(sql, id, address, 10_000_000 + index);
    ids.push(id);
  }
  return ids;
}

/**
 * `changes` changes to random claims among `claims`, each in its own transaction, as the
 * service's writers make them: the confirmer's confirmation and completion (alone or together),
 * a reorg taking a payout back, an undone completion, the matcher's rewind of a payment and the
 * payment found again (or not, when another writer found it first, as the matcher's insert skips
 * a payment on record). Two writers may meet on a claim: a deadlock or a lock timeout is a writer
 * giving up, as in the service, and the figures must stay right through it.
 */
export async function randomChanges(
  writer: Database,
  claims: string[],
  changes: number,
): Promise<void> {
  for (let change = 0; change < changes; change += 1) {
    const claim = claims[Math.floor(Math.random() * claims.length)] ?? "";
    const daysAgo = Math.floor(Math.random() * 3);
    try {
      switch (Math.floor(Math.random() * 6)) {
        case 0:
          await writer`update app.payouts set status = 'confirmed' where claim_id = ${claim}`;
          break;
        case 1:
          await writer`update app.claims set status = 'completed',
            completed_at = now() - ${daysAgo} * interval '1 day' where id = ${claim}`;
          break;
        case 2:
          await writer.begin(async (transaction) => {
            await transaction`update app.payouts set status = 'confirmed' where claim_id = ${claim}`;
            await transaction`update app.claims set status = 'completed',
              completed_at = now() - ${daysAgo} * interval '1 day' where id = ${claim}`;
          });
          break;
        case 3:
          await writer`update app.payouts set status = 'broadcast' where claim_id = ${claim}`;
          break;
        case 4:
          await writer`update app.claims set status = 'paying', completed_at = null
            where id = ${claim}`;
          break;
        default:
          await writer.begin(async (transaction) => {
            const [gone] = await transaction`delete from app.payments where claim_id = ${claim}
              returning claim_id`;
            if (gone) return;
            nonce += 1;
            const hash = `0x${nonce.toString(16).padStart(64, "f")}`;
            await transaction`insert into app.payments (tx_hash, log_index, claim_id,
                block_number, block_hash, from_address, value, matched_by)
              values (${hash}, 0, ${claim}, 1, ${hash}, ${"0x".padEnd(42, "d")},
                ${9_000_000 + nonce}, 'sender')
              on conflict do nothing`;
          });
      }
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "40P01" && code !== "55P03") throw error;
    }
  }
}

/** `writers` connections of their own to `url`, each running `work` at once. */
export async function inParallel(
  url: string,
  writers: number,
  work: (writer: Database) => Promise<void>,
) {
  const connections = Array.from({ length: writers }, (_, index) =>
    connectDatabase(url, { max: 1, name: `ledger writer ${index}` }),
  );
  try {
    await Promise.all(connections.map(work));
  } finally {
    await Promise.all(connections.map((connection) => connection.end()));
  }
}
