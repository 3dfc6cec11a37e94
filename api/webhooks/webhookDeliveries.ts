import type { Database, Sql } from "../db/connect.ts";
import type { StoredEvent } from "../events/eventEnvelope.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { relineDeliveries } from "./deliveryLines.ts";
import type { WebhookOutcome } from "./sendWebhook.ts";

/** The one writer of app.webhook_deliveries (migration 0026), and of endpoints' health. */

/** Events turned into deliveries in one transaction at most. */
const FAN_OUT_BATCH = 1_000;

/**
 * New events become deliveries: to each enabled operator endpoint that wants the type, and to
 * the endpoints of the claim (its `webhook_url`s) and of the A2A tasks that name it (their push
 * configs). In id order, so the deliveries of one claim are created in the order of its changes;
 * a delivery that joins a line behind a pending one waits at 'infinity' (api/webhooks/deliveryLines.ts).
 * Returns how many events.
 */
export async function fanOutEvents(sql: Database): Promise<number> {
  // Most ticks find nothing new: an index probe (events_waiting_for_fan_out) instead of the
  // exclusive lock, which would wait for every result and registration in flight.
  const [waiting] = await sql<{ any: boolean }[]>`
    select exists (select 1 from app.events where not fanned_out) as any`;
  if (!waiting?.any) return 0;
  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
    const events = await transaction<{ id: bigint }[]>`
      with batch as (
        select id, type, claim_id, ordering_key from app.events
        where not fanned_out order by id limit ${FAN_OUT_BATCH}
      ),
      targets as (
        select b.id as event_id, e.id as endpoint_id, b.ordering_key
        from batch b join app.webhook_endpoints e
          on e.kind = 'operator' and e.disabled_at is null
          and (cardinality(e.event_types) = 0 or b.type = any(e.event_types))
        union all
        -- a claim's webhook_url, and the push configs of the A2A tasks that name the claim
        select b.id, e.id, b.ordering_key
        from batch b join app.webhook_endpoints e
          on e.kind <> 'operator' and e.claim_id = b.claim_id and e.disabled_at is null
      ),
      placed as (
        select t.event_id, t.endpoint_id, t.ordering_key,
          row_number() over (partition by t.endpoint_id, t.ordering_key order by t.event_id) = 1
            and not exists (
              select 1 from app.webhook_deliveries pending
              where pending.endpoint_id = t.endpoint_id
                and pending.ordering_key = t.ordering_key and pending.status = 'pending')
            as heads_line
        from targets t
      ),
      deliveries as (
        insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key, run_at)
        select event_id, endpoint_id, ordering_key,
          case when heads_line then now() else 'infinity'::timestamptz end
        from placed
        order by event_id
        on conflict (event_id, endpoint_id) do nothing
      )
      update app.events e set fanned_out = true
      from batch where e.id = batch.id
      returning e.id`;
    return events.length;
  });
}

export interface DueDelivery {
  id: bigint;
  attempts: number;
  redelivery: boolean;
  endpoint_id: string;
  kind: "operator" | "claim" | "a2a";
  url: string;
  secret: string;
  token: string | null;
  /** An A2A config's authentication, sent back as `Authorization: <scheme> <credentials>`. */
  auth_scheme: string | null;
  auth_credentials: string | null;
  task_id: string | null;
  /** The A2A task's context (its push notification names it), when the task is still kept. */
  context_id: string | null;
  event: StoredEvent;
}

/** What may be taken now: free slots, and how many are in flight to each endpoint. */
export interface FreeSlots {
  limit: number;
  perEndpoint: number;
  /** Deliveries in flight by endpoint id (this worker's sends not yet answered). */
  sending: ReadonlyMap<string, number>;
  /**
   * How many of the `limit` may go to strangers' endpoints (claims' `webhook_url`s, A2A push
   * configs): anyone can point many of them at one receiver that never answers.
   */
  strangers: number;
  leaseMs: number;
}

/**
 * Takes up to `limit` deliveries that are due, at most `perEndpoint` in flight to one endpoint
 * and at most `strangers` to strangers' endpoints,
 * counting the attempt and leasing them for `leaseMs` before anything is sent: a crash after the
 * send leaves the attempt counted, and its retry goes out marked as a redelivery. Only the head
 * of a line is ever due (api/webhooks/deliveryLines.ts), so the scan reads heads only; the
 * `not exists` is the guard of the order all the same (one index probe per head).
 */
export async function takeDueDeliveries(sql: Sql, slots: FreeSlots): Promise<DueDelivery[]> {
  if (slots.limit <= 0) return [];
  const busy = [...slots.sending].filter(([, count]) => count > 0);
  const full = busy.filter(([, count]) => count >= slots.perEndpoint).map(([id]) => id);
  const rows = await sql<
    (Omit<DueDelivery, "event"> & Omit<StoredEvent, "id"> & { event_id: bigint })[]
  >`
    with heads as not materialized (
      select d.id, d.endpoint_id, d.run_at, e.kind from app.webhook_deliveries d
      join app.webhook_endpoints e on e.id = d.endpoint_id and e.disabled_at is null
      where d.status = 'pending' and d.run_at <= now()
        and d.endpoint_id <> all(${full}::text[])
        and not exists (
          select 1 from app.webhook_deliveries earlier
          where earlier.endpoint_id = d.endpoint_id and earlier.ordering_key = d.ordering_key
            and earlier.status = 'pending' and earlier.event_id < d.event_id)
    ),
    due as (
      -- Each kind read on its own, so strangers' due deliveries, however many come first, take
      -- no more than their slots and hide none of the operator's.
      (select id, endpoint_id, run_at from heads where kind = 'operator'
        order by run_at, id limit ${slots.limit})
      union all
      (select id, endpoint_id, run_at from heads where kind <> 'operator'
        order by run_at, id limit ${Math.max(0, Math.min(slots.strangers, slots.limit))})
    ),
    placed as (
      select due.id, due.run_at,
        row_number() over (partition by due.endpoint_id order by due.run_at, due.id)
          + coalesce(busy.sending, 0) as in_flight,
        row_number() over (order by due.run_at, due.id) as place
      from due
      left join unnest(${busy.map(([id]) => id)}::text[], ${busy.map(([, count]) => count)}::int[])
        as busy (endpoint_id, sending) on busy.endpoint_id = due.endpoint_id
    ),
    taken as (
      -- Checked again as each row is locked: a delivery another replica took meanwhile (one that
      -- lost its lock) is leased, no longer due.
      update app.webhook_deliveries d
      set attempts = d.attempts + 1, last_attempt_at = now(),
        run_at = now() + make_interval(secs => ${slots.leaseMs / 1000})
      from placed
      where d.id = placed.id and placed.in_flight <= ${slots.perEndpoint}
        and placed.place <= ${slots.limit}
        and d.status = 'pending' and d.run_at <= now()
      returning d.id, d.attempts, d.redelivery, d.endpoint_id, d.event_id
    )
    select t.id, t.attempts, t.redelivery, t.endpoint_id, e.kind, e.url, e.secret, e.token,
      e.auth_scheme, e.auth_credentials, e.task_id, a.context_id, t.event_id, v.type, v.claim_id,
      v.ordering_key, v.occurred_at, v.snapshot
    from taken t
    join app.webhook_endpoints e on e.id = t.endpoint_id
    join app.events v on v.id = t.event_id
    left join app.a2a_tasks a on a.id = e.task_id
    order by t.event_id`;
  return rows.map((row) => ({
    id: row.id,
    attempts: row.attempts,
    redelivery: row.redelivery || row.attempts > 1,
    endpoint_id: row.endpoint_id,
    kind: row.kind,
    url: row.url,
    secret: row.secret,
    token: row.token,
    auth_scheme: row.auth_scheme,
    auth_credentials: row.auth_credentials,
    task_id: row.task_id,
    context_id: row.context_id,
    event: {
      id: row.event_id,
      type: row.type,
      claim_id: row.claim_id,
      ordering_key: row.ordering_key,
      occurred_at: row.occurred_at,
      snapshot: row.snapshot,
    },
  }));
}

export interface DeliveryResult {
  delivery: Pick<DueDelivery, "id" | "attempts" | "endpoint_id">;
  outcome: WebhookOutcome;
}

export interface RetryPolicy {
  /** Waits before each retry; past the last the delivery fails. */
  retryScheduleMs: number[];
  /** An endpoint failing this long, with a delivery out of retries, is disabled. */
  disableAfterMs: number;
}

/**
 * ±20% of the wait at random, so that the deliveries that failed together (an endpoint down)
 * do not all come back at the same instant.
 */
export function retryDelayMs(schedule: number[], attempts: number, random = Math.random): number {
  const base = schedule[Math.min(attempts - 1, schedule.length - 1)] ?? 0;
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * Writes what the attempts came to: a 2xx delivers (and clears the endpoint's failing mark);
 * otherwise the delivery waits for its next retry, or fails once the schedule is spent, and an
 * endpoint that has failed for `disableAfterMs` is then disabled, its pending deliveries failed
 * with it (docs/events.md#retries). The next of a line delivered or given up comes due
 * (deliveryLines.ts). An answer counts only for the attempt it answers, and a failure only
 * for a delivery still pending: one that comes after its lease ended (the delivery taken again
 * since), or after its endpoint was disabled (the delivery failed with it), changes nothing.
 * Returns the endpoints it disabled.
 */
export async function recordDeliveryResults(
  sql: Database,
  results: DeliveryResult[],
  policy: RetryPolicy,
): Promise<string[]> {
  if (results.length === 0) return [];
  const delivered = results.filter((result) => result.outcome.ok);
  const failed = results.filter((result) => !result.outcome.ok);
  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock_shared(${LOCK_KEYS.eventFanOut})`;
    const lines: { endpoint_id: string; ordering_key: string }[] = [];
    if (delivered.length > 0) {
      lines.push(
        ...(await transaction<{ endpoint_id: string; ordering_key: string }[]>`
          update app.webhook_deliveries d
          set status = 'delivered', delivered_at = now(), last_status = r.status, last_error = null
          from unnest(${delivered.map((r) => String(r.delivery.id))}::bigint[],
            ${delivered.map((r) => r.delivery.attempts)}::int[],
            ${delivered.map((r) => r.outcome.status ?? 0)}::int[]) as r (id, attempts, status)
          where d.id = r.id and d.attempts = r.attempts
          returning d.endpoint_id, d.ordering_key`),
      );
      await transaction`
        update app.webhook_endpoints set failing_since = null
        where id = any(${[...new Set(delivered.map((r) => r.delivery.endpoint_id))]}::text[])
          and failing_since is not null`;
    }
    if (failed.length === 0) {
      await relineDeliveries(transaction, lines);
      return [];
    }
    const spent = (r: DeliveryResult) => r.delivery.attempts > policy.retryScheduleMs.length;
    const retried = await transaction<
      { endpoint_id: string; ordering_key: string; status: string }[]
    >`
      update app.webhook_deliveries d
      set status = case when r.spent = 1 then 'failed' else 'pending' end,
        run_at = now() + make_interval(secs => r.wait_ms / 1000.0),
        last_status = r.status, last_error = r.error
      from unnest(${failed.map((r) => String(r.delivery.id))}::bigint[],
        ${failed.map((r) => r.delivery.attempts)}::int[],
        ${failed.map((r) => (spent(r) ? 1 : 0))}::int[],
        ${failed.map((r) => (spent(r) ? 0 : retryDelayMs(policy.retryScheduleMs, r.delivery.attempts)))}::bigint[],
        ${failed.map((r) => r.outcome.status)}::int[],
        ${failed.map((r) => (r.outcome.ok ? null : r.outcome.error.slice(0, 500)))}::text[])
        as r (id, attempts, spent, wait_ms, status, error)
      where d.id = r.id and d.attempts = r.attempts and d.status = 'pending'
      returning d.endpoint_id, d.ordering_key, d.status`;
    await relineDeliveries(transaction, [...lines, ...retried]);
    // Only the failures written count against their endpoints: a late one changed nothing.
    await transaction`
      update app.webhook_endpoints set failing_since = now()
      where id = any(${[...new Set(retried.map((row) => row.endpoint_id))]}::text[])
        and failing_since is null`;
    const exhausted = [
      ...new Set(retried.filter((row) => row.status === "failed").map((row) => row.endpoint_id)),
    ];
    if (exhausted.length === 0) return [];
    const disabled = await transaction<{ id: string }[]>`
      update app.webhook_endpoints
      set disabled_at = now(), disabled_reason = 'failing since ' || failing_since::text
      where id = any(${exhausted}::text[]) and disabled_at is null
        and failing_since <= now() - make_interval(secs => ${policy.disableAfterMs / 1000})
      returning id`;
    if (disabled.length > 0) {
      await transaction`
        update app.webhook_deliveries set status = 'failed', last_error = 'endpoint disabled'
        where endpoint_id = any(${disabled.map((row) => row.id)}::text[]) and status = 'pending'`;
    }
    return disabled.map((row) => row.id);
  });
}

export interface FailedDelivery {
  id: bigint;
  endpoint_id: string;
  url: string;
  event_id: bigint;
  type: string;
  claim_id: string | null;
  attempts: number;
  last_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
}

/** Deliveries given up, newest first: `pay-and-earn webhooks failures`. */
export async function listFailedDeliveries(
  sql: Sql,
  filter: { endpointId?: string; limit: number },
): Promise<FailedDelivery[]> {
  return sql<FailedDelivery[]>`
    select d.id, d.endpoint_id, e.url, d.event_id, v.type, v.claim_id, d.attempts,
      d.last_attempt_at, d.last_status, d.last_error
    from app.webhook_deliveries d
    join app.webhook_endpoints e on e.id = d.endpoint_id
    join app.events v on v.id = d.event_id
    where d.status = 'failed'
      and (${filter.endpointId ?? null}::text is null or d.endpoint_id = ${filter.endpointId ?? null})
    order by d.id desc
    limit ${filter.limit}`;
}

/**
 * Sends failed deliveries again (by id, or every failed one of an endpoint): pending, attempts
 * from zero, marked as redeliveries, each in its line in event order (the first due now, before
 * any later one still pending); their endpoints are enabled again. Returns how many.
 */
export async function redeliver(
  sql: Database,
  which: { deliveryIds: bigint[] } | { endpointId: string },
): Promise<number> {
  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
    // Alone, not shared: a result finishing the head of this line unseen by this transaction
    // (and this one unseen by it) would leave the delivery put back waiting behind a head that
    // is no longer pending, at 'infinity' for good (deliveryLines.ts).
    const rows = await transaction<{ endpoint_id: string; ordering_key: string }[]>`
      update app.webhook_deliveries
      set status = 'pending', attempts = 0, run_at = now(), redelivery = true
      where status = 'failed' and ${
        "deliveryIds" in which
          ? transaction`id = any(${which.deliveryIds.map(String)}::bigint[])`
          : transaction`endpoint_id = ${which.endpointId}`
      }
      returning endpoint_id, ordering_key`;
    await relineDeliveries(transaction, rows);
    const endpoints = [...new Set(rows.map((row) => row.endpoint_id))];
    if (endpoints.length > 0) {
      await transaction`
        update app.webhook_endpoints
        set disabled_at = null, disabled_reason = null, failing_since = null
        where id = any(${endpoints}::text[])`;
    }
    await transaction`select pg_notify('pay_and_earn_events', '')`;
    return rows.length;
  });
}
