import type { Sql } from "../db/connect.ts";

/**
 * Deletes amount reservations past their `held_until` (the claim's expiry plus
 * AMOUNT_HOLD_SECONDS): from then on a late payment of the amount is no longer told apart from
 * a new claim's, and the amount is free again. New claims take such rows over anyway; deleting
 * them keeps the fill level (health, metrics) and the search for a free amount honest.
 *
 * A row a creation is taking over right now is left for the next round (`skip locked`): a batch
 * of creations (app.create_claims) holds the rows it took and may try more, and a delete that
 * waited for one of them while holding others deleted could wait for it in a circle.
 */
export async function releaseExpiredReservations(sql: Sql): Promise<number> {
  const rows = await sql`
    delete from app.amount_reservations
    where amount in (
      select amount from app.amount_reservations where held_until < now()
      for update skip locked)
    returning amount`;
  return rows.length;
}
