import type { Database, Transaction } from "../db/connect.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";

/**
 * A line is the pending deliveries of one endpoint with one ordering key (a claim, a transfer):
 * they go out one at a time, in the order of their events. Only the first of a line has a
 * run_at a poll can reach; those behind it wait at 'infinity' until it is delivered or given up.
 * So a poll reads heads of line only, however many deliveries wait behind an endpoint that fails
 * for hours (docs/events.md#order-per-claim).
 *
 * Whoever changes a line puts it right in the same transaction: the fan-out and a claim's
 * registration when they add deliveries (webhookDeliveries.ts, webhookEndpoints.ts place them
 * as they insert), results and redeliveries with `relineDeliveries` below. Changes of one line
 * are kept apart by the fan-out lock (LOCK_KEYS.eventFanOut). Sharing it keeps nothing apart:
 * two transactions that share it each reline from their own snapshot, blind to the other's
 * uncommitted change. So only results share it, with each other (one worker writes them, one
 * batch at a time; a batch of a worker that lost its lock may overlap, and only finishes
 * heads: neither puts a delivery back behind a head). Everything that puts a delivery in a
 * line or back in it holds it alone: the fan-out, an A2A config's catching up, a redelivery
 * (a redelivery sharing it with a result that delivered the head would leave the redelivered
 * one at 'infinity', behind a head no longer pending). A claim's registration shares it, and
 * makes lines of a new endpoint no result can touch yet. `wakeOrphanedDeliveries` below is the
 * safety net for a bug here.
 */

/** The first pending delivery of each line comes due now if it was waiting; the rest wait. */
export async function relineDeliveries(
  transaction: Transaction,
  lines: { endpoint_id: string; ordering_key: string }[],
): Promise<void> {
  if (lines.length === 0) return;
  await transaction`
    with lines as (
      select distinct endpoint_id, ordering_key
      from unnest(${lines.map((line) => line.endpoint_id)}::text[],
        ${lines.map((line) => line.ordering_key)}::text[]) as l (endpoint_id, ordering_key)
    ),
    placed as (
      select d.id, d.run_at = 'infinity' as waiting,
        row_number() over (partition by d.endpoint_id, d.ordering_key order by d.event_id)
          as place
      from lines l
      join app.webhook_deliveries d on d.endpoint_id = l.endpoint_id
        and d.ordering_key = l.ordering_key and d.status = 'pending'
    )
    ${relineUpdate(transaction)}`;
}

/** The same for every line of these endpoints (an A2A config catching up with its claim). */
export async function relineEndpoints(
  transaction: Transaction,
  endpointIds: string[],
): Promise<void> {
  if (endpointIds.length === 0) return;
  await transaction`
    with placed as (
      select d.id, d.run_at = 'infinity' as waiting,
        row_number() over (partition by d.endpoint_id, d.ordering_key order by d.event_id)
          as place
      from app.webhook_deliveries d
      where d.endpoint_id = any(${endpointIds}::text[]) and d.status = 'pending'
    )
    ${relineUpdate(transaction)}`;
}

function relineUpdate(transaction: Transaction) {
  // A head that waited comes due; one behind that was due (an operator's redelivery put an
  // earlier event back in its line) waits. A head that is due, leased or backing off keeps its time.
  return transaction`
    update app.webhook_deliveries d
    set run_at = case when p.place = 1 then now() else 'infinity'::timestamptz end
    from placed p
    where d.id = p.id and (p.place = 1) = p.waiting`;
}

/**
 * A delivery waiting at 'infinity' with no earlier pending one in its line would wait forever:
 * it comes due now. None should ever be found (each change of a line relines it in its own
 * transaction); finding one means a bug, so the count is returned to be logged. Holds the
 * fan-out lock alone, so no change of a line is half seen. Reads every waiting delivery, one
 * index probe each: run every few minutes, not each tick.
 */
export async function wakeOrphanedDeliveries(sql: Database): Promise<number> {
  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
    const woken = await transaction`
      update app.webhook_deliveries d set run_at = now()
      where d.status = 'pending' and d.run_at = 'infinity'
        and not exists (
          select 1 from app.webhook_deliveries earlier
          where earlier.endpoint_id = d.endpoint_id and earlier.ordering_key = d.ordering_key
            and earlier.status = 'pending' and earlier.event_id < d.event_id)
      returning d.id`;
    return woken.length;
  });
}
