import type { Database, Sql } from "../db/connect.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";

/**
 * The stored A2A tasks (app.a2a_tasks): the protocol's JSON of each task, and the columns its
 * lookups need. The A2A surface (api/a2a) reads and writes them through the core; the money is
 * never here, only in the claim a task names.
 */
export interface TaskRecord {
  id: string;
  contextId: string;
  claimId: string | null;
  state: string;
  task: Record<string, unknown>;
  /** updated_at as PostgreSQL writes it (microseconds kept), for the ListTasks page token. */
  updatedAt: string;
}

interface Row {
  id: string;
  context_id: string;
  claim_id: string | null;
  state: string;
  task: Record<string, unknown>;
  updated_at: string;
}

/**
 * How long a task lives after its last change: `withClaimSeconds` once it names a claim (it
 * follows the claim), `unpaidSeconds` while it names none (it waits for an x402 payment whose
 * terms lapse long before).
 */
export interface TaskLifetimes {
  withClaimSeconds: number;
  unpaidSeconds: number;
}

/** The condition "still within its lifetime", for a where clause. */
function live(sql: Sql, ttl: TaskLifetimes) {
  return sql`updated_at > now() - make_interval(secs => case when claim_id is null
    then ${ttl.unpaidSeconds}::int else ${ttl.withClaimSeconds}::int end)`;
}

function recordOf(row: Row): TaskRecord {
  return {
    id: row.id,
    contextId: row.context_id,
    claimId: row.claim_id,
    state: row.state,
    task: row.task,
    updatedAt: row.updated_at,
  };
}

/**
 * Inserts or overwrites a task (the SDK saves the whole task after each event). `client` is
 * who created it; an overwrite keeps the first client.
 */
export async function saveTaskRecord(
  sql: Sql,
  record: Omit<TaskRecord, "updatedAt">,
  client: string | null,
): Promise<void> {
  await sql`
    insert into app.a2a_tasks (id, context_id, claim_id, state, task, client)
    values (${record.id}, ${record.contextId}, ${record.claimId}, ${record.state},
            ${sql.json(record.task as never)}, ${client})
    on conflict (id) do update
      set context_id = excluded.context_id,
          claim_id = coalesce(excluded.claim_id, app.a2a_tasks.claim_id),
          state = excluded.state,
          task = excluded.task,
          updated_at = now()`;
}

/** Forgets a task (one that was refused after it was stored). */
export async function deleteTaskRecord(sql: Sql, id: string): Promise<void> {
  await sql`delete from app.a2a_tasks where id = ${id}`;
}

/** A live task, or null (one past its lifetime is as good as deleted). */
export async function readTaskRecord(
  sql: Sql,
  id: string,
  ttl: TaskLifetimes,
): Promise<TaskRecord | null> {
  const [row] = await sql<Row[]>`
    select id, context_id, claim_id, state, task, updated_at::text as updated_at
    from app.a2a_tasks
    where id = ${id} and ${live(sql, ttl)}`;
  return row ? recordOf(row) : null;
}

/**
 * Stores a new task that waits for its x402 payment (no claim yet) for `client`, unless the
 * client already holds `limit` live ones; says whether it was stored. Counting and storing are
 * one step under the client's lock: with a count first and a save later, parallel requests
 * from one client each saw room and all were stored. Two statements, not one: a statement's
 * snapshot predates a lock it takes, so the count is a statement after the lock (docs/traps.md#postgresql,
 * "One SQL statement cannot take an advisory lock and then read...").
 */
export async function reserveWaitingTaskRecord(
  sql: Database,
  record: Omit<TaskRecord, "updatedAt">,
  client: string,
  limit: number,
  ttl: TaskLifetimes,
): Promise<boolean> {
  return sql.begin(async (transaction) => {
    await transaction`
      select pg_advisory_xact_lock(${LOCK_KEYS.a2aWaitingTasks}, hashtext(${client}))`;
    const inserted = await transaction`
      insert into app.a2a_tasks (id, context_id, claim_id, state, task, client)
      select ${record.id}, ${record.contextId}, null, ${record.state},
             ${transaction.json(record.task as never)}, ${client}
      where (select count(*) from app.a2a_tasks
             where client = ${client} and claim_id is null and ${live(transaction, ttl)}) < ${limit}
      returning id`;
    return inserted.length === 1;
  });
}

/** Deletes the tasks past their lifetime; says how many went. */
export async function pruneTaskRecords(sql: Sql, ttl: TaskLifetimes): Promise<number> {
  const rows = await sql`
    delete from app.a2a_tasks
    where not ${live(sql, ttl)}
    returning id`;
  return rows.length;
}

/** A page of a context's tasks, newest first; `after` is the last (updated_at, id) seen. */
export async function listTaskRecords(
  sql: Sql,
  query: {
    contextId: string;
    state: string | null;
    limit: number;
    after: { updatedAt: string; id: string } | null;
  },
  ttl: TaskLifetimes,
): Promise<TaskRecord[]> {
  const rows = await sql<Row[]>`
    select id, context_id, claim_id, state, task, updated_at::text as updated_at
    from app.a2a_tasks
    where context_id = ${query.contextId}
      and ${live(sql, ttl)}
      and (${query.state}::text is null or state = ${query.state})
      and (${query.after?.updatedAt ?? null}::text is null
           or (updated_at, id) < (${query.after?.updatedAt ?? null}::text::timestamptz,
                                  ${query.after?.id ?? null}))
    order by updated_at desc, id desc
    limit ${query.limit}`;
  return rows.map(recordOf);
}
