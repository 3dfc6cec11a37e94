import { randomInt } from "node:crypto";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";

const ATTEMPTS = 25;

/**
 * Variant A: the unique amounts a new claim may take (price + a random 1..`spaceSize` atomic
 * units): `app.create_claim` reserves one that no held reservation has (a reservation past its
 * `held_until` is taken over), all of them read in one statement. None free among these few
 * means the space is nearly full (or flooded), and the claim opens without one.
 */
export function uniqueAmountCandidates(spaceSize: number): string[] {
  return Array.from({ length: ATTEMPTS }, () =>
    String(PRICE_ATOMIC + BigInt(randomInt(1, spaceSize + 1))),
  );
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
