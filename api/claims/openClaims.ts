import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";
import {
  hasSqlState,
  isDatabaseTimeout,
  isDatabaseUnavailable,
  SQL_STATE,
} from "../db/sqlState.ts";
import type { Logger } from "../logger.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import {
  type CreatedRow,
  type CreationArguments,
  creationArguments,
  type InsertClaimResult,
  insertClaimResult,
  insertClaimWith,
  type NewClaim,
} from "./insertClaim.ts";
import { type ClaimReader, gatherClaimReads } from "./readClaim.ts";

/** Opens a claim awaiting payment, as `insertClaim` does on its own (see gatherClaimCreations). */
export type ClaimOpener = (input: NewClaim) => Promise<InsertClaimResult>;

/** At most this many claims in one call: the batch holds all their creation locks until it ends. */
const MOST_CLAIMS_PER_CALL = 64;
/**
 * Calls in flight at once (the pool has 10 connections, which reads share). Creations asked for
 * meanwhile wait for the next call: under 50 clients at once a call carried 10.7 claims on average
 * with 4 in flight, 14.7 with 2 and 24 with 1 (BENCHMARKS.md#claim-creation-in-postgresql). The
 * database runs one batch at a time anyway (app.create_claims); the second call's claims are ready
 * when it ends.
 */
const MOST_CALLS_IN_FLIGHT = 2;
/** The first count of creations after which the gatherer analyzes the claims; then each doubling. */
const FIRST_ANALYZE_AFTER = 64;

interface Waiting {
  input: NewClaim;
  resolve(result: InsertClaimResult): void;
  reject(error: unknown): void;
}

/**
 * Claim creations gathered into one database call per turn of the event loop (`app.create_claims`,
 * api/db/definitions/claim_creation.sql), as claim reads are (readClaim.ts). Under many clients at once, a call
 * each made PostgreSQL's round trip most of what POST /api/claims cost
 * (BENCHMARKS.md#claim-creation-in-postgresql). A creation asked for alone goes out alone, as before;
 * a creation never joins a call already sent. Each claim is born exactly as by itself (its locks,
 * the reuse of an open claim, the client's cap, its unique amount), in the order asked.
 *
 * A call that fails is logged (a warning for a timeout, a lost connection or a deadlock the
 * database broke; an error for anything else, which should not happen) and its claims are
 * opened one by one instead, with the ids and amounts the call had: a claim the call did commit
 * before its answer was lost is answered as it is, never opened twice.
 *
 * After 64 creations, and after each doubling of them since, the gatherer analyzes the claims and
 * their amounts (`growthAnalyzer`): the creation functions run on generic plans, made once on
 * the statistics of the moment, and a table analyzed while it held a few finished claims had the
 * reuse lookup walk every open claim for every claim created, until autovacuum's next visit a
 * minute later (BENCHMARKS.md#claim-creation-in-postgresql).
 */
export function gatherClaimCreations(
  sql: Sql,
  config: Pick<ServiceConfig, "claims">,
  logger: Logger,
  readClaims: ClaimReader = gatherClaimReads(sql),
): ClaimOpener {
  const waiting: Waiting[] = [];
  let scheduled = false;
  let inFlight = 0;
  const noteCreationsAsked = growthAnalyzer(sql, logger);

  function schedule(): void {
    if (scheduled || waiting.length === 0 || inFlight >= MOST_CALLS_IN_FLIGHT) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      while (waiting.length > 0 && inFlight < MOST_CALLS_IN_FLIGHT) {
        const batch = waiting.splice(0, MOST_CLAIMS_PER_CALL);
        inFlight += 1;
        createTogether(batch)
          .catch((error: unknown) => {
            // Not expected (each claim's failure is settled below): never leave a creation
            // waiting. A waiter already settled ignores this.
            for (const waiter of batch) waiter.reject(error);
          })
          .finally(() => {
            inFlight -= 1;
            schedule();
            noteCreationsAsked(batch.length);
          });
      }
    });
  }

  async function createTogether(batch: Waiting[]): Promise<void> {
    const claims = batch.map((waiter) => creationArguments(config, waiter.input));
    if (batch.length === 1) {
      const [only] = batch as [Waiting];
      return insertClaimWith(sql, claims[0] as CreationArguments).then(only.resolve, only.reject);
    }
    let rows: (CreatedRow & { position: number })[];
    try {
      rows = await sql<(CreatedRow & { position: number })[]>`
        select * from app.create_claims(
          ${sql.json(
            claims.map((claim, position) => ({
              position,
              ...claim,
              expires_at: claim.expires_at.toISOString(),
              held_until: claim.held_until.toISOString(),
            })),
          )},
          ${LOCK_KEYS.claimCreation}, ${String(PRICE_ATOMIC)}, ${LOCK_KEYS.claimBatches})`;
    } catch (error) {
      const expected =
        isDatabaseTimeout(error) ||
        isDatabaseUnavailable(error) ||
        hasSqlState(error, SQL_STATE.deadlockDetected);
      logger[expected ? "warn" : "error"](
        { err: error, claims: batch.length },
        "a batch of claim creations failed; its claims are opened one by one",
      );
      await openOneByOne(batch, claims);
      return;
    }
    const byPosition = new Map(rows.map((row) => [row.position, row]));
    if (rows.length !== batch.length || batch.some((_, position) => !byPosition.has(position))) {
      // Should not happen: the call committed, and its claims are found by their ids.
      logger.error(
        { claims: batch.length, answers: rows.length },
        "app.create_claims did not answer each claim once; its claims are opened one by one",
      );
      await openOneByOne(batch, claims);
      return;
    }
    batch.forEach((waiter, position) => {
      const row = byPosition.get(position) as CreatedRow;
      waiter.resolve(insertClaimResult(row, (claims[position] as CreationArguments).cap));
    });
  }

  /** The claims of a failed call, each alone, with the arguments (ids) the call had. */
  async function openOneByOne(batch: Waiting[], claims: CreationArguments[]): Promise<void> {
    const committedAs = (id: string) => readClaims(id).catch(() => null);
    await Promise.all(
      batch.map(async (waiter, position) => {
        const claim = claims[position] as CreationArguments;
        // A call whose answer was lost may have committed: the claim is there under its id.
        const committed = await committedAs(claim.id);
        if (committed) return waiter.resolve({ type: "created", claim: committed });
        try {
          waiter.resolve(await insertClaimWith(sql, claim));
        } catch (error) {
          // The call committed after the read above: the claim is there (its id is taken).
          const late = hasSqlState(error, SQL_STATE.uniqueViolation)
            ? await committedAs(claim.id)
            : null;
          if (late) waiter.resolve({ type: "created", claim: late });
          else waiter.reject(error);
        }
      }),
    );
  }

  return (input) =>
    new Promise((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      schedule();
    });
}

/**
 * Counts the creations asked for (reused and refused ones too: only the doublings matter); at
 * `FIRST_ANALYZE_AFTER` and each doubling since, analyzes the tables the creation functions
 * read, one analyze at a time, creations going on meanwhile: an analyze blocks no read or write,
 * only another analyze, a vacuum or a change of the tables' definition, for as long as it takes
 * (the pool's lock and statement timeouts bound it). A failed analyze is only logged: autovacuum
 * still comes, and migration 0017 has it come after a fixed number of changes. The service owns
 * the tables it migrated; a role that did not would have each analyze skipped with a warning.
 */
function growthAnalyzer(sql: Sql, logger: Logger): (asked: number) => void {
  let asked = 0;
  let nextAnalyzeAt = FIRST_ANALYZE_AFTER;
  let analyzing = false;
  return (more) => {
    asked += more;
    if (asked < nextAnalyzeAt || analyzing) return;
    while (nextAnalyzeAt <= asked) nextAnalyzeAt *= 2;
    analyzing = true;
    sql`analyze app.claims, app.amount_reservations`
      .catch((error: unknown) =>
        logger.warn({ err: error, asked }, "analyzing the claims after their growth failed"),
      )
      .finally(() => {
        analyzing = false;
      });
  };
}
