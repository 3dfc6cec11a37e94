import type { Sql } from "../db/connect.ts";
import { keptCount, readRowCounts } from "../db/rowCounts.ts";
import { CLAIM_STATUSES, type ClaimStatus } from "../schemas/claimStatus.ts";

export interface StatusCounts {
  claims: Record<ClaimStatus, number>;
  /** Payouts ever broadcast, mined successfully, and reverted: only ever grow. */
  payouts: { sent: number; confirmed: number; reverted: number };
}

/**
 * Claims by status and payouts by outcome, from the database: the same for every replica. Read
 * from the counts the triggers keep (a few rows, however many claims: api/db/rowCounts.ts);
 * until the row-counts worker has counted every row once after migration 0032, counted afresh.
 */
export async function readStatusCounts(sql: Sql): Promise<StatusCounts> {
  const kept = await readRowCounts(sql, ["claims", "payouts"]);
  if (!kept) return countStatuses(sql);
  const claims = Object.fromEntries(
    CLAIM_STATUSES.map((status) => [status, keptCount(kept, "claims", status)]),
  ) as Record<ClaimStatus, number>;
  return {
    claims,
    payouts: {
      sent: keptCount(kept, "payouts", "sent"),
      confirmed: keptCount(kept, "payouts", "confirmed"),
      reverted: keptCount(kept, "payouts", "reverted"),
    },
  };
}

/** The same counts over every claim and payout: before the first count, and for checking. */
export async function countStatuses(sql: Sql): Promise<StatusCounts> {
  const [claimRows, [payouts]] = await Promise.all([
    sql<{ status: ClaimStatus; count: number }[]>`
      select status, count(*)::int as count from app.claims group by status`,
    sql<{ sent: number; confirmed: number; reverted: number }[]>`
      select
        count(*) filter (where broadcasts > 0 or status in ('confirmed', 'reverted'))::int as sent,
        count(*) filter (where status = 'confirmed')::int as confirmed,
        count(*) filter (where status = 'reverted')::int as reverted
      from app.payouts`,
  ]);
  const claims = Object.fromEntries(CLAIM_STATUSES.map((status) => [status, 0])) as Record<
    ClaimStatus,
    number
  >;
  for (const row of claimRows) claims[row.status] = row.count;
  return { claims, payouts: payouts ?? { sent: 0, confirmed: 0, reverted: 0 } };
}
