import type { Sql, Transaction } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";

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

/**
 * The indexer's tables behind `chain.outgoing_transfer` and `chain.incoming_transfer`, by schema
 * and pg_class oid ("indexer_1a2b: 16402 16388"): a schema dropped and indexed again under the
 * same name has new oids, so this names one index of the chain. Null before Ponder made the views.
 */
export async function readIndexerTables(sql: Sql): Promise<string | null> {
  const rows = await sql<{ view: string; schema: string; oid: string }[]>`
    select v.relname as view, n.nspname as schema, t.oid::int8::text as oid
    from pg_depend d
    join pg_rewrite r on r.oid = d.objid
    join pg_class v on v.oid = r.ev_class
    join pg_class t on t.oid = d.refobjid
    join pg_namespace n on n.oid = t.relnamespace
    where v.relname in ('outgoing_transfer', 'incoming_transfer') and v.relnamespace = (
        select oid from pg_namespace where nspname = 'chain')
      and t.relkind = 'r'`;
  const outgoing = rows.find((row) => row.view === "outgoing_transfer");
  const incoming = rows.find((row) => row.view === "incoming_transfer");
  if (!outgoing || !incoming) return null;
  return `${outgoing.schema}: ${outgoing.oid} ${incoming.oid}`;
}

/**
 * Pins the `chain` views (and the tables behind them) until the transaction ends, so every
 * statement in it reads one index: Ponder re-points them at a new schema by dropping and making
 * them again (its create_views transaction), which then waits. Taken in the order Ponder drops
 * them, so the two wait for each other instead of deadlocking. False, and nothing locked, before
 * Ponder has made them.
 */
export async function pinIndexerViews(tx: Transaction): Promise<boolean> {
  try {
    await tx.savepoint(
      (savepoint) => savepoint`
        lock table chain.incoming_transfer, chain.outgoing_transfer, chain._ponder_checkpoint
        in access share mode`,
    );
    return true;
  } catch (error) {
    if (hasSqlState(error, SQL_STATE.undefinedTable)) return false;
    if (hasSqlState(error, SQL_STATE.invalidSchemaName)) return false;
    throw error;
  }
}
