import postgres from "postgres";

type Types = { bigint: bigint };

/** The pool: runs queries, and also opens transactions and reserves connections. */
export type Database = postgres.Sql<Types>;
/** Anything that runs queries: the pool, a transaction or a reserved connection. */
export type Sql = postgres.ISql<Types>;
/** Inside `sql.begin`: a transaction, which can open savepoints. */
export type Transaction = postgres.TransactionSql<Types>;

/** Whether the database answers at all: one round trip, touching no table. */
export async function pingDatabase(sql: Sql): Promise<void> {
  await sql`select 1`;
}

export interface DatabaseOptions {
  /** Connections in the pool (default 10). */
  max?: number;
  /** `application_name`, as `pg_stat_activity` shows it. */
  name?: string;
  /**
   * Per-connection limits, sent as startup parameters so every connection of the pool has them
   * from its first query (0 or unset: PostgreSQL's default, none). A statement running longer is
   * cancelled (SQLSTATE 57014); a lock (row, table or advisory) waited for longer is given up
   * (55P03); a session idle inside a transaction longer is closed, its locks released.
   */
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
  /**
   * For a session that holds something (an advisory lock): its connections are never closed
   * for being idle or old, and `onClose` says when the server or the network closed one.
   */
  session?: { onClose(): void };
}

/**
 * A postgres.js pool. `int8` comes back as bigint; `numeric` (atomic USDC amounts) comes back
 * as a string and is converted with BigInt() where it is read. The service opens one pool per
 * kind of work (HTTP, workers, rate limits: api/service.ts), so none can starve the others.
 */
export function connectDatabase(url: string, options: DatabaseOptions = {}): Database {
  const limits: Record<string, number> = {};
  if (options.statementTimeoutMs) limits.statement_timeout = options.statementTimeoutMs;
  if (options.lockTimeoutMs) limits.lock_timeout = options.lockTimeoutMs;
  if (options.idleInTransactionTimeoutMs) {
    limits.idle_in_transaction_session_timeout = options.idleInTransactionTimeoutMs;
  }
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    types: { bigint: postgres.BigInt },
    connection: { application_name: options.name ?? "pay-and-earn", ...limits },
    ...(options.session
      ? {
          idle_timeout: undefined,
          max_lifetime: null,
          onclose: () => options.session?.onClose(),
        }
      : {}),
  });
}
