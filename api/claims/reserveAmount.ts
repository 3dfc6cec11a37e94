import { randomInt } from "node:crypto";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";

const MAX_SUFFIX = 999_999;
const ATTEMPTS = 25;

/**
 * Variant A: price + a random 1..999999 atomic units, unique among held reservations. A
 * reservation past its `held_until` is taken over. Returns null when no free amount was found
 * (the space is nearly full: the operator should shorten the hold or the lifetime).
 */
export async function reserveUniqueAmount(
  transaction: Sql,
  claimId: string,
  heldUntil: Date,
): Promise<bigint | null> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const amount = PRICE_ATOMIC + BigInt(randomInt(1, MAX_SUFFIX + 1));
    const rows = await transaction`
      insert into app.amount_reservations (amount, claim_id, held_until)
      values (${String(amount)}, ${claimId}, ${heldUntil})
      on conflict (amount) do update
        set claim_id = excluded.claim_id, held_until = excluded.held_until
        where app.amount_reservations.held_until < now()
      returning amount`;
    if (rows.length > 0) return amount;
  }
  return null;
}
