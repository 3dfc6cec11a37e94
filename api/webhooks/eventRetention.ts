import type { Database } from "../db/connect.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";

/** Events deleted in one statement at most: short transactions, short locks. */
export const PRUNE_BATCH = 5_000;

/**
 * Deletes events older than `retentionMs`, with their deliveries, once nothing is owed on them:
 * fanned out, and no delivery still pending (a delivery backing off keeps its event until it is
 * delivered or given up). Failed deliveries go with their event: `webhooks redeliver` can send
 * them for EVENT_RETENTION_DAYS. The claims, payments and payouts the events told of are the
 * money's history and are kept; an event is a notice of a change, a snapshot of a claim that
 * `GET /api/claims/{id}` still answers (docs/operating.md#disk-and-retention).
 *
 * Oldest first (by occurred_at, migration 0033's index), in batches until none is left or
 * `maxBatches` ran; returns how many events. The one deleter of app.events; deliveries are
 * otherwise written by webhookDeliveries.ts alone.
 */
export async function pruneEvents(
  sql: Database,
  options: { retentionMs: number; maxBatches?: number; batch?: number },
): Promise<number> {
  const batch = options.batch ?? PRUNE_BATCH;
  let pruned = 0;
  for (let round = 0; round < (options.maxBatches ?? 20); round += 1) {
    // The fan-out lock, alone: an operator's redelivery or an answer being written cannot make a
    // delivery pending again between this statement's read and its delete.
    const [row] = await sql.begin(async (transaction) => {
      await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
      return transaction<{ events: number }[]>`
        with old as (
          select e.id from app.events e
          where e.fanned_out
            and e.occurred_at < now() - make_interval(secs => ${options.retentionMs / 1000})
            and not exists (
              select 1 from app.webhook_deliveries d
              where d.event_id = e.id and d.status = 'pending')
          -- The oldest first, by events_fanned_out_by_time (migration 0033): a walk by id read
          -- every event kept to find none old enough.
          order by e.occurred_at
          limit ${batch}
          for update of e skip locked
        ),
        deliveries as (
          delete from app.webhook_deliveries d using old where d.event_id = old.id
        ),
        events as (
          delete from app.events e using old where e.id = old.id returning e.id
        )
        select count(*)::int as events from events`;
    });
    const events = row?.events ?? 0;
    pruned += events;
    if (events < batch) break;
  }
  return pruned;
}
