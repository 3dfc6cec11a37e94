import type { Transaction } from "../db/connect.ts";

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
 * are kept apart by the fan-out lock (LOCK_KEYS.eventFanOut): the fan-out and an A2A config's
 * catching up hold it alone, results and redeliveries share it, so a delivery is never placed
 * behind a head that another transaction is finishing unseen.
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
