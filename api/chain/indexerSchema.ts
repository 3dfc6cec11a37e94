import type { Sql } from "../db/connect.ts";

/**
 * The schema of Ponder's tables behind the `chain` views (`indexer_<build>`): a re-index writes
 * a new one and points the views at it. Null before Ponder has made the views.
 */
export async function readIndexerSchema(sql: Sql): Promise<string | null> {
  const [row] = await sql<{ schema: string }[]>`
    select n.nspname as schema
    from pg_depend d
    join pg_rewrite r on r.oid = d.objid
    join pg_class v on v.oid = r.ev_class
    join pg_class t on t.oid = d.refobjid
    join pg_namespace n on n.oid = t.relnamespace
    where v.relname = 'incoming_transfer' and v.relnamespace = (
        select oid from pg_namespace where nspname = 'chain')
      and t.relkind = 'r'
    limit 1`;
  return row?.schema ?? null;
}
