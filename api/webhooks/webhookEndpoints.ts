import { randomBytes } from "node:crypto";
import type { Database, Sql } from "../db/connect.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";

/**
 * The one writer of app.webhook_endpoints (migration 0025): operators' endpoints, claims'
 * `webhook_url`s, A2A tasks' push notification configs.
 */

export interface WebhookEndpoint {
  id: string;
  kind: "operator" | "claim" | "a2a";
  url: string;
  event_types: string[];
  claim_id: string | null;
  description: string | null;
  created_at: Date;
  failing_since: Date | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
}

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

function newEndpointId(): string {
  return `we_${randomBytes(12).toString("base64url")}`;
}

export async function addOperatorEndpoint(
  sql: Sql,
  endpoint: { url: string; eventTypes: string[]; description: string | null },
): Promise<WebhookEndpoint & { secret: string }> {
  const [row] = await sql<(WebhookEndpoint & { secret: string })[]>`
    insert into app.webhook_endpoints (id, kind, url, secret, event_types, description)
    values (${newEndpointId()}, 'operator', ${endpoint.url}, ${newWebhookSecret()},
      ${endpoint.eventTypes}::text[], ${endpoint.description})
    returning id, kind, url, secret, event_types, claim_id, description, created_at,
      failing_since, disabled_at, disabled_reason`;
  return row as WebhookEndpoint & { secret: string };
}

export async function listEndpoints(
  sql: Sql,
  kind: WebhookEndpoint["kind"] = "operator",
): Promise<(WebhookEndpoint & { pending: number; failed: number })[]> {
  return sql<(WebhookEndpoint & { pending: number; failed: number })[]>`
    select e.id, e.kind, e.url, e.event_types, e.claim_id, e.description, e.created_at,
      e.failing_since, e.disabled_at, e.disabled_reason,
      (select count(*)::int from app.webhook_deliveries d
        where d.endpoint_id = e.id and d.status = 'pending') as pending,
      (select count(*)::int from app.webhook_deliveries d
        where d.endpoint_id = e.id and d.status = 'failed') as failed
    from app.webhook_endpoints e
    where e.kind = ${kind}
    order by e.created_at`;
}

/** Deletes an operator's endpoint and its deliveries; false when there is none by that id. */
export async function removeEndpoint(sql: Sql, id: string): Promise<boolean> {
  const rows = await sql`
    delete from app.webhook_endpoints where id = ${id} and kind = 'operator' returning id`;
  return rows.length > 0;
}

/** Marks an endpoint usable again (a redelivery does it too). */
export async function enableEndpoint(sql: Sql, id: string): Promise<boolean> {
  const rows = await sql`
    update app.webhook_endpoints
    set disabled_at = null, disabled_reason = null, failing_since = null
    where id = ${id} returning id`;
  return rows.length > 0;
}

export type ClaimWebhookResult = { type: "registered"; secret: string } | { type: "too_many" };

/**
 * A claim's `webhook_url`: an endpoint for that claim's events, with a secret of its own given
 * to the creator once. Registered after the claim is created (its id is known only then): the
 * events already turned into deliveries are delivered to it too, in one transaction with the
 * fan-out lock shared (LOCK_KEYS.eventFanOut), so none falls between.
 */
export async function registerClaimWebhook(
  sql: Database,
  claim: { claimId: string; url: string; limit: number },
): Promise<ClaimWebhookResult> {
  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock_shared(${LOCK_KEYS.eventFanOut})`;
    const [count] = await transaction<{ count: number }[]>`
      select count(*)::int as count from app.webhook_endpoints
      where claim_id = ${claim.claimId} and kind = 'claim'`;
    if ((count?.count ?? 0) >= claim.limit) return { type: "too_many" } as const;
    const id = newEndpointId();
    const secret = newWebhookSecret();
    await transaction`
      insert into app.webhook_endpoints (id, kind, url, secret, claim_id)
      values (${id}, 'claim', ${claim.url}, ${secret}, ${claim.claimId})`;
    await transaction`
      insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key)
      select e.id, ${id}, e.ordering_key from app.events e
      where e.claim_id = ${claim.claimId} and e.fanned_out
      order by e.id`;
    return { type: "registered", secret } as const;
  });
}
