import type { ServiceConfig } from "../config/serviceConfig.ts";
import { connectDatabase, type Database, type DatabaseOptions } from "./connect.ts";

/**
 * The service's connections, one pool per kind of work, so that none can take another's:
 * requests that hold connections (a slow RPC inside a transaction, a flood of reads) cannot
 * stop payouts, and a busy HTTP pool cannot turn rate limits off. Every connection carries the
 * statement, lock and idle-in-transaction timeouts of DATABASE_*_TIMEOUT_MS.
 */
export interface ServicePools {
  /** The HTTP surfaces: use-cases, health, metrics. */
  http: Database;
  /** The workers' queries (matcher, expiry, payouts …). */
  workers: Database;
  /** Counting rate limits (a connection or two is plenty: counts are batched). */
  rateLimits: Database;
}

export function databaseLimits(config: Pick<ServiceConfig, "databaseTimeouts">): DatabaseOptions {
  const { statementMs, lockMs, idleInTransactionMs } = config.databaseTimeouts;
  return {
    statementTimeoutMs: statementMs,
    lockTimeoutMs: lockMs,
    idleInTransactionTimeoutMs: idleInTransactionMs,
  };
}

export function openServicePools(
  config: Pick<ServiceConfig, "databaseUrl" | "databasePools" | "databaseTimeouts">,
): ServicePools {
  const limits = databaseLimits(config);
  const pool = (max: number, role: string) =>
    connectDatabase(config.databaseUrl, { ...limits, max, name: `pay-and-earn ${role}` });
  return {
    http: pool(config.databasePools.http, "http"),
    workers: pool(config.databasePools.workers, "workers"),
    rateLimits: pool(config.databasePools.rateLimits, "rate limits"),
  };
}

/**
 * A worker loop's own connection for its advisory lock: a one-connection pool, so that when the
 * server or the network drops it (a restart, a failover) the next query reconnects instead of
 * failing, and `onClose` tells the loop its lock went with the old one. (A postgres.js
 * `reserve()`d connection cannot be used for this: a query on one the server has closed throws
 * out of a timer and takes the whole process down; docs/traps.md#postgresjs.)
 */
export function workerLockSession(
  config: Pick<ServiceConfig, "databaseUrl" | "databaseTimeouts">,
): (onClose: () => void) => Database {
  return (onClose) =>
    connectDatabase(config.databaseUrl, {
      ...databaseLimits(config),
      max: 1,
      name: "pay-and-earn worker locks",
      session: { onClose },
    });
}
