import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import {
  type CreatedRow,
  type CreationArguments,
  creationArguments,
  type InsertClaimResult,
  insertClaim,
  insertClaimResult,
  type NewClaim,
} from "./insertClaim.ts";

/** Opens a claim awaiting payment, as `insertClaim` does on its own (see gatherClaimCreations). */
export type ClaimOpener = (input: NewClaim) => Promise<InsertClaimResult>;

/** At most this many claims in one call: the batch holds all their creation locks until it ends. */
const MOST_CLAIMS_PER_CALL = 64;
/**
 * Calls in flight at once (the pool has 10 connections, which reads share). Creations asked for
 * meanwhile wait for the next call: under 50 clients at once a call carried 10.7 claims on
 * average with 4 in flight, 14.7 with 2 and 24 with 1 (BENCHMARKS.md); fewer, larger calls are
 * fewer round trips, and two in flight keep a slow call from holding up every creation.
 */
const MOST_CALLS_IN_FLIGHT = 2;

interface Waiting {
  input: NewClaim;
  resolve(result: InsertClaimResult): void;
  reject(error: unknown): void;
}

/**
 * Claim creations gathered into one database call per turn of the event loop
 * (`app.create_claims`, migration 0013), as claim reads are (readClaim.ts). Under many
 * clients at once, a call each made PostgreSQL's round trip most of what POST /api/claims cost:
 * on these machines the socket write alone was a third of the service's busy time
 * (BENCHMARKS.md). A creation asked for alone goes out alone, as before; a creation never joins
 * a call already sent. Each claim is born exactly as by itself (its locks, the reuse of an open
 * claim, the client's cap, its unique amount), in the order asked. When a call fails (a
 * deadlock PostgreSQL broke, a connection lost), nothing of it was kept, and its claims are
 * created one by one instead, each with its own answer or error.
 */
export function gatherClaimCreations(sql: Sql, config: Pick<ServiceConfig, "claims">): ClaimOpener {
  const waiting: Waiting[] = [];
  let scheduled = false;
  let inFlight = 0;

  function schedule(): void {
    if (scheduled || waiting.length === 0 || inFlight >= MOST_CALLS_IN_FLIGHT) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      while (waiting.length > 0 && inFlight < MOST_CALLS_IN_FLIGHT) {
        const batch = waiting.splice(0, MOST_CLAIMS_PER_CALL);
        inFlight += 1;
        void createTogether(batch).finally(() => {
          inFlight -= 1;
          schedule();
        });
      }
    });
  }

  async function createTogether(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch as [Waiting];
      return insertClaim(sql, config, only.input).then(only.resolve, only.reject);
    }
    const claims = batch.map((waiter) => creationArguments(config, waiter.input));
    let rows: (CreatedRow & { position: number })[];
    try {
      rows = await sql<(CreatedRow & { position: number })[]>`
        select * from app.create_claims(
          ${sql.json(claims.map((claim, position) => ({ position, ...claim, expires_at: claim.expires_at.toISOString(), held_until: claim.held_until.toISOString() })))},
          ${LOCK_KEYS.claimCreation}, ${String(PRICE_ATOMIC)})`;
    } catch {
      await Promise.all(
        batch.map((waiter) =>
          insertClaim(sql, config, waiter.input).then(waiter.resolve, waiter.reject),
        ),
      );
      return;
    }
    settle(batch, claims, rows);
  }

  return (input) =>
    new Promise((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      schedule();
    });
}

function settle(
  batch: Waiting[],
  claims: CreationArguments[],
  rows: (CreatedRow & { position: number })[],
): void {
  const byPosition = new Map(rows.map((row) => [row.position, row]));
  batch.forEach((waiter, position) => {
    const row = byPosition.get(position);
    if (!row) waiter.reject(new Error("app.create_claims answered nothing for a claim"));
    else waiter.resolve(insertClaimResult(row, (claims[position] as CreationArguments).cap));
  });
}
