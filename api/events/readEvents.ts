import type { Sql } from "../db/connect.ts";
import type { StoredEvent } from "./eventEnvelope.ts";

/** At most this many events in one read; a stream catching up reads again. */
export const EVENTS_PER_READ = 200;

/**
 * A claim's events after `afterId`, oldest first: what a stream resuming from `Last-Event-ID`
 * missed. Events of one claim have increasing ids in the order of its changes (migration 0026).
 */
export async function readClaimEvents(
  sql: Sql,
  claimId: string,
  afterId: bigint,
  limit = EVENTS_PER_READ,
): Promise<StoredEvent[]> {
  return sql<StoredEvent[]>`
    select id, type, claim_id, ordering_key, occurred_at, snapshot
    from app.events
    where claim_id = ${claimId} and id > ${afterId}
    order by id
    limit ${limit}`;
}

/**
 * The events of several claims, each after its own id: one query for every stream a process
 * serves when events were written (the NOTIFY says only that some were).
 */
export async function readEventsOfClaims(
  sql: Sql,
  after: Map<string, bigint>,
  limit = EVENTS_PER_READ * 10,
): Promise<StoredEvent[]> {
  if (after.size === 0) return [];
  return sql<StoredEvent[]>`
    select e.id, e.type, e.claim_id, e.ordering_key, e.occurred_at, e.snapshot
    from unnest(${[...after.keys()]}::text[], ${[...after.values()].map(String)}::bigint[])
      as c (claim_id, after_id)
    join app.events e on e.claim_id = c.claim_id and e.id > c.after_id
    order by e.id
    limit ${limit}`;
}
