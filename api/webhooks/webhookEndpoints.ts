import { randomBytes } from "node:crypto";
import type { Database, Sql, Transaction } from "../db/connect.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { relineEndpoints } from "./deliveryLines.ts";

/**
 * The one writer of app.webhook_endpoints (migration 0026): operators' endpoints, claims'
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

/**
 * Deleting endpoints deletes their deliveries (on delete cascade): under the fan-out lock,
 * alone, taken first. Results lock deliveries, then their endpoints; this locks the endpoint,
 * then its deliveries, so the lock keeps the two apart (LOCK_KEYS.eventFanOut).
 */
async function deleteEndpoints<T>(sql: Database, remove: (transaction: Transaction) => Promise<T>) {
  return sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
    return remove(transaction);
  });
}

/** Deletes an operator's endpoint and its deliveries; false when there is none by that id. */
export async function removeEndpoint(sql: Database, id: string): Promise<boolean> {
  const rows = await deleteEndpoints(
    sql,
    (transaction) => transaction`
      delete from app.webhook_endpoints where id = ${id} and kind = 'operator' returning id`,
  );
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
    // A new endpoint: the first event of each line is due, the others wait behind it.
    await transaction`
      insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key, run_at)
      select e.id, ${id}, e.ordering_key,
        case when row_number() over (partition by e.ordering_key order by e.id) = 1
          then now() else 'infinity'::timestamptz end
      from app.events e
      where e.claim_id = ${claim.claimId} and e.fanned_out
      order by e.id`;
    return { type: "registered", secret } as const;
  });
}

/** An A2A task's push notification config as the client set it (A2A 1.0 field names). */
export interface A2aPushConfig {
  taskId: string;
  id: string;
  url: string;
  token: string;
  authentication: { scheme: string; credentials: string } | null;
}

export type SaveA2aPushConfigResult = { type: "saved" } | { type: "too_many" };

/**
 * Sets an A2A task's push notification config (`tasks/pushNotificationConfig/set`, or the
 * config of a `SendMessage`): the same id replaces the one before, enabled again; at most
 * `limit` configs per task. It gets every event of the task's claim, those before it first.
 */
export async function saveA2aPushConfig(
  sql: Database,
  config: A2aPushConfig,
  limit: number,
): Promise<SaveA2aPushConfigResult> {
  return sql.begin(async (transaction) => {
    // One task's configs are counted and written one request at a time.
    await transaction`
      select pg_advisory_xact_lock(${LOCK_KEYS.a2aPushConfigs}, hashtext(${config.taskId}))`;
    // Before the upsert, not at the catching up after it: results hold it while they lock
    // deliveries, then endpoints; taken after this config's row, the two would deadlock.
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
    const [count] = await transaction<{ count: number }[]>`
      select count(*)::int as count from app.webhook_endpoints
      where kind = 'a2a' and task_id = ${config.taskId} and config_id <> ${config.id}`;
    if ((count?.count ?? 0) >= limit) return { type: "too_many" } as const;
    await transaction`
      insert into app.webhook_endpoints
        (id, kind, url, secret, task_id, config_id, token, auth_scheme, auth_credentials)
      values (${newEndpointId()}, 'a2a', ${config.url}, ${newWebhookSecret()},
        ${config.taskId}, ${config.id}, ${config.token},
        ${config.authentication?.scheme ?? null}, ${config.authentication?.credentials ?? null})
      on conflict (task_id, config_id) where kind = 'a2a' do update
        set url = excluded.url, secret = excluded.secret, token = excluded.token,
          auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials,
          disabled_at = null, disabled_reason = null, failing_since = null`;
    await catchUpTaskConfigs(transaction, config.taskId);
    return { type: "saved" } as const;
  });
}

/**
 * A task's push configs follow the claim the task names: they take its claim_id (the fan-out
 * sends them the claim's events from then on), and the claim's events the fan-out has passed
 * already are delivered to them too (none twice). A task names its claim only after the claim
 * is created, and a config may come after that: either way its claim's events reach it from
 * the first, in order. Holds the fan-out lock, so no event falls between.
 */
async function catchUpTaskConfigs(transaction: Transaction, taskId: string): Promise<void> {
  // Alone, not shared: its configs may have lines already, which results (sharing the lock)
  // could be changing (deliveryLines.ts).
  await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.eventFanOut})`;
  await transaction`
    update app.webhook_endpoints e set claim_id = t.claim_id
    from app.a2a_tasks t
    where e.kind = 'a2a' and e.task_id = ${taskId} and t.id = e.task_id
      and t.claim_id is not null and e.claim_id is distinct from t.claim_id`;
  await transaction`
    insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key)
    select v.id, e.id, v.ordering_key
    from app.webhook_endpoints e
      join app.events v on v.claim_id = e.claim_id and v.fanned_out
    where e.kind = 'a2a' and e.task_id = ${taskId} and e.disabled_at is null
    order by v.id
    on conflict (event_id, endpoint_id) do nothing`;
  const configs = await transaction<{ id: string }[]>`
    select id from app.webhook_endpoints where kind = 'a2a' and task_id = ${taskId}`;
  await relineEndpoints(
    transaction,
    configs.map((config) => config.id),
  );
}

/**
 * A task has named its claim: its push configs, if it has any (most tasks have none, and pay
 * one read), catch up with the claim's events.
 */
export async function catchUpA2aPushConfigs(sql: Database, taskId: string): Promise<void> {
  const [configs] = await sql<{ any: boolean }[]>`
    select exists (select 1 from app.webhook_endpoints where kind = 'a2a' and task_id = ${taskId})
      as any`;
  if (configs?.any) await sql.begin((transaction) => catchUpTaskConfigs(transaction, taskId));
}

/** An A2A task's push notification configs, oldest first. */
export async function listA2aPushConfigs(sql: Sql, taskId: string): Promise<A2aPushConfig[]> {
  const rows = await sql<
    {
      config_id: string;
      url: string;
      token: string | null;
      auth_scheme: string | null;
      auth_credentials: string | null;
    }[]
  >`
    select config_id, url, token, auth_scheme, auth_credentials from app.webhook_endpoints
    where kind = 'a2a' and task_id = ${taskId}
    order by created_at, id`;
  return rows.map((row) => ({
    taskId,
    id: row.config_id,
    url: row.url,
    token: row.token ?? "",
    authentication:
      row.auth_scheme === null
        ? null
        : { scheme: row.auth_scheme, credentials: row.auth_credentials ?? "" },
  }));
}

/**
 * Deletes an A2A task's push notification config (every config of the task without
 * `configId`), and the deliveries still owed to it.
 */
export async function deleteA2aPushConfig(
  sql: Database,
  taskId: string,
  configId?: string,
): Promise<void> {
  // Most tasks have no configs: one read, and no exclusive lock for them (a deletion of a task
  // must not wait behind a fan-out or a prune).
  const [configs] = await sql<{ any: boolean }[]>`
    select exists (select 1 from app.webhook_endpoints where kind = 'a2a' and task_id = ${taskId})
      as any`;
  if (!configs?.any) return;
  await deleteEndpoints(
    sql,
    (transaction) => transaction`
      delete from app.webhook_endpoints
      where kind = 'a2a' and task_id = ${taskId}
        and (${configId ?? null}::text is null or config_id = ${configId ?? null})`,
  );
}

/**
 * Deletes the push configs of A2A tasks that are gone (past their lifetime, or refused after a
 * `SendMessage` set a config): an hour after their creation, so that a task being created now
 * keeps its config. Returns how many.
 */
export async function pruneA2aPushConfigs(sql: Database): Promise<number> {
  const rows = await deleteEndpoints(
    sql,
    (transaction) => transaction`
      delete from app.webhook_endpoints e
      where e.kind = 'a2a' and e.created_at < now() - interval '1 hour'
        and not exists (select 1 from app.a2a_tasks t where t.id = e.task_id)
      returning e.id`,
  );
  return rows.length;
}
