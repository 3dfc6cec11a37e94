/**
 * The SQLSTATE codes the service branches on, in one place. Branch on these, never on an
 * error's message text (it changes with the server's version and locale).
 */
export const SQL_STATE = {
  uniqueViolation: "23505",
  /** PostgreSQL broke a cycle of waits by ending this transaction. */
  deadlockDetected: "40P01",
  undefinedTable: "42P01",
  /** No function of that name and arguments (a database whose definitions are older). */
  undefinedFunction: "42883",
  /** A qualified name's schema does not exist (LOCK TABLE says so where a query says 42P01). */
  invalidSchemaName: "3F000",
  /** statement_timeout or a cancel. */
  queryCanceled: "57014",
  /** lock_timeout, or NOWAIT on a locked row. */
  lockNotAvailable: "55P03",
  /** idle_in_transaction_session_timeout closed the session. */
  idleInTransactionTimeout: "25P03",
  /** The server is shutting down (a restart, a failover) and ended the session. */
  adminShutdown: "57P01",
  crashShutdown: "57P02",
  /** The server is starting up or shutting down and takes no connection yet. */
  cannotConnectNow: "57P03",
} as const;

export type SqlState = (typeof SQL_STATE)[keyof typeof SQL_STATE];

/** True when `error` is a PostgreSQL error with this SQLSTATE. */
export function hasSqlState(error: unknown, state: SqlState): boolean {
  return (error as { code?: unknown } | null)?.code === state;
}

/**
 * The database gave up on the work, not on the request: a DATABASE_*_TIMEOUT_MS ran out.
 * Worth a retry later; never the client's fault, never a bug to report.
 */
export function isDatabaseTimeout(error: unknown): boolean {
  return (
    hasSqlState(error, SQL_STATE.queryCanceled) ||
    hasSqlState(error, SQL_STATE.lockNotAvailable) ||
    hasSqlState(error, SQL_STATE.idleInTransactionTimeout)
  );
}

/** postgres.js's own codes for a connection it lost or could not make, and the socket's. */
const CONNECTION_LOST = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
]);

/**
 * The database could not be reached or dropped the session (a restart, a failover, a network
 * cut): like a timeout, worth a retry later and never a bug to report.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    hasSqlState(error, SQL_STATE.adminShutdown) ||
    hasSqlState(error, SQL_STATE.crashShutdown) ||
    hasSqlState(error, SQL_STATE.cannotConnectNow) ||
    // Class 08: connection exceptions.
    (typeof code === "string" && (code.startsWith("08") || CONNECTION_LOST.has(code)))
  );
}
