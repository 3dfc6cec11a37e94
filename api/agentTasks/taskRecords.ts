import type { Sql } from "../db/connect.ts";

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

/** Inserts or overwrites a task (the SDK saves the whole task after each event). */
export async function saveTaskRecord(
  sql: Sql,
  record: Omit<TaskRecord, "updatedAt">,
): Promise<void> {
  await sql`
    insert into app.a2a_tasks (id, context_id, claim_id, state, task)
    values (${record.id}, ${record.contextId}, ${record.claimId}, ${record.state},
            ${sql.json(record.task as never)})
    on conflict (id) do update
      set context_id = excluded.context_id,
          claim_id = coalesce(excluded.claim_id, app.a2a_tasks.claim_id),
          state = excluded.state,
          task = excluded.task,
          updated_at = now()`;
}

export async function readTaskRecord(sql: Sql, id: string): Promise<TaskRecord | null> {
  const [row] = await sql<Row[]>`
    select id, context_id, claim_id, state, task, updated_at::text as updated_at
    from app.a2a_tasks where id = ${id}`;
  return row ? recordOf(row) : null;
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
): Promise<TaskRecord[]> {
  const rows = await sql<Row[]>`
    select id, context_id, claim_id, state, task, updated_at::text as updated_at
    from app.a2a_tasks
    where context_id = ${query.contextId}
      and (${query.state}::text is null or state = ${query.state})
      and (${query.after?.updatedAt ?? null}::text is null
           or (updated_at, id) < (${query.after?.updatedAt ?? null}::text::timestamptz,
                                  ${query.after?.id ?? null}))
    order by updated_at desc, id desc
    limit ${query.limit}`;
  return rows.map(recordOf);
}
