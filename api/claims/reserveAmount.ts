import { randomInt } from "node:crypto";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";

const ATTEMPTS = 25;

/**
 * Variant A: price + a random 1..`spaceSize` atomic units, unique among held reservations. A
 * reservation past its `held_until` is taken over. Returns null when no free amount was found
 * in a few tries: the space is nearly full (or flooded), and the claim opens without one.
 */
export async function reserveUniqueAmount(
  transaction: Sql,
  claimId: string,
  heldUntil: Date,
  spaceSize: number,
): Promise<bigint | null> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const amount = PRICE_ATOMIC + BigInt(randomInt(1, spaceSize + 1));
    const inserted = await transaction`
      insert into app.amount_reservations (amount, claim_id, held_until)
      values (${String(amount)}, ${claimId}, ${heldUntil})
      on conflict (amount) do nothing
      returning amount`;
    if (inserted.length > 0) return amount;
    // Taken: over only if past held_until. Not `on conflict do update ... where`, which locks
    // the held row it does not update until the transaction ends: two creations that tried
    // each other's held amounts waited for each other in a circle (a deadlock, seen with
    // parallel requests and a crowded space). An update locks only the row it changes.
    const takenOver = await transaction`
      update app.amount_reservations
      set claim_id = ${claimId}, held_until = ${heldUntil}
      where amount = ${String(amount)} and held_until < now()
      returning amount`;
    if (takenOver.length > 0) return amount;
  }
  return null;
}

/** How much of the amount space is held now (`amount_space_scarce`, the fill-level metric). */
export async function readAmountSpaceFill(
  sql: Sql,
  spaceSize: number,
): Promise<{ held: number; size: number; ratio: number }> {
  const [row] = await sql<{ held: number }[]>`
    select count(*)::int as held from app.amount_reservations where held_until >= now()`;
  const held = row?.held ?? 0;
  return { held, size: spaceSize, ratio: held / spaceSize };
}
