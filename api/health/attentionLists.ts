import type { Sql } from "../db/connect.ts";

// What an operator looks at by hand (`pay-and-earn payouts --stuck`, `claims --status`): the
// rows behind the counts health reports, read here beside them, not written in the CLI.

/** A payout, or a paid claim without one, that has waited longer than it should. */
export interface StuckPayout {
  claim_id: string;
  claim_status: string;
  nonce: string | null;
  payout_tx: string | null;
  payout_status: string | null;
  broadcasts: number | null;
  waiting_seconds: number;
  nonce_taken: boolean;
  last_error: string | null;
}

/**
 * Payouts signed or broadcast and not mined for `olderThanSeconds`, or whose nonce a foreign
 * transaction took; and claims paid that long ago with no payout signed.
 */
export async function readStuckPayouts(sql: Sql, olderThanSeconds: number): Promise<StuckPayout[]> {
  return sql<StuckPayout[]>`
    select p.claim_id, c.status as claim_status, p.nonce::text as nonce, p.tx_hash as payout_tx,
      p.status as payout_status, p.broadcasts,
      extract(epoch from now() - p.created_at)::int as waiting_seconds,
      p.nonce_taken_at is not null as nonce_taken, p.last_error
    from app.payouts p join app.claims c on c.id = p.claim_id
    where p.status in ('signed', 'broadcast')
      and (p.nonce_taken_at is not null
        or p.created_at <= now() - make_interval(secs => ${olderThanSeconds}))
    union all
    select c.id, c.status, null, null, null, null,
      extract(epoch from now() - coalesce(c.paid_at, c.created_at))::int, false, null
    from app.claims c
    where c.status = 'paid'
      and coalesce(c.paid_at, c.created_at) <= now() - make_interval(secs => ${olderThanSeconds})
    order by waiting_seconds desc`;
}

export interface ClaimNeedingLook {
  claim_id: string;
  status: string;
  flow: string;
  payout_address: string;
  created_at: Date;
  paid_at: Date | null;
  failure_reason: string | null;
  payout_tx: string | null;
  payout_status: string | null;
  revert_reason: string | null;
  last_error: string | null;
}

/** Claims in `status` created since `since`, newest first, each with its latest payout. */
export async function readClaimsByStatus(
  sql: Sql,
  status: string,
  since: Date,
  limit: number,
): Promise<ClaimNeedingLook[]> {
  return sql<ClaimNeedingLook[]>`
    select c.id as claim_id, c.status, c.flow, c.payout_address, c.created_at, c.paid_at,
      c.failure_reason, p.tx_hash as payout_tx, p.status as payout_status, p.revert_reason,
      p.last_error
    from app.claims c
    left join lateral (
      select tx_hash, status, revert_reason, last_error from app.payouts
      where claim_id = c.id order by nonce desc limit 1
    ) p on true
    where c.status = ${status} and c.created_at >= ${since}
    order by c.created_at desc
    limit ${limit}`;
}
