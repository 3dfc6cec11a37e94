import type { Sql } from "../db/connect.ts";
import type { MatchRule } from "../matching/decideMatches.ts";
import { readReceipt, type StoredReceipt } from "../receipts/readReceipt.ts";
import { type ClaimStatus, isFinalClaimStatus } from "../schemas/claimStatus.ts";
import { CLAIM_ID_PATTERN } from "../schemas/inputs.ts";

export interface ClaimDetails {
  id: string;
  flow: "claim" | "x402" | "mail";
  status: ClaimStatus;
  payoutAddress: string;
  agentName: string | null;
  hasEmail: boolean;
  amountDue: bigint;
  txHash: string | null;
  txHashSigned: boolean;
  createdAt: Date;
  expiresAt: Date;
  paidAt: Date | null;
  completedAt: Date | null;
  failureReason: string | null;
  payment: {
    txHash: string;
    logIndex: number;
    from: string;
    value: bigint;
    matchedBy: MatchRule;
    blockNumber: bigint;
  } | null;
  payoutTx: string | null;
}

/** A row of `app.claim_details` (api/db/definitions/claim_details.sql), as readClaim and insertClaim get it. */
export interface ClaimDetailsRow {
  id: string;
  flow: ClaimDetails["flow"];
  status: ClaimDetails["status"];
  payout_address: string;
  agent_name: string | null;
  has_email: boolean;
  amount_due: string;
  tx_hash: string | null;
  tx_hash_signed: boolean;
  created_at: Date;
  expires_at: Date;
  paid_at: Date | null;
  completed_at: Date | null;
  failure_reason: string | null;
  payment_tx: string | null;
  payment_log_index: number | null;
  payment_from: string | null;
  payment_value: string | null;
  matched_by: string | null;
  payment_block: bigint | null;
  payout_tx: string | null;
}

export async function readClaim(sql: Sql, claimId: string): Promise<ClaimDetails | null> {
  const [row] = await sql<ClaimDetailsRow[]>`
    select * from app.claim_details where id = ${claimId}`;
  return row ? claimDetailsFromRow(row) : null;
}

/** Reads by id, gathered: see `gatherClaimReads`. */
export type ClaimReader = (claimId: string) => Promise<ClaimDetails | null>;

/** At most this many ids in one query; a larger gathering is read in several, side by side. */
const MOST_IDS_PER_QUERY = 500;

/**
 * At most this many gatherings read at once (the service's pool has 10 connections). Reads
 * asked for meanwhile keep gathering and go out together when one is done: still after they
 * were asked for, so no older than their requests, and a slow database gets fewer, larger
 * queries instead of one more per request.
 */
export const MOST_GATHERINGS_IN_FLIGHT = 4;

type Settle = (row: ClaimDetailsRow | undefined | Error) => void;

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * Reads of claims by id gathered into one query per turn of the event loop. Clients poll their
 * claim's status URL; under many pollers at once a query per request made PostgreSQL's round
 * trip and the driver's work per query most of what `GET /api/claims/{id}` cost. A read never
 * joins a query already sent: it starts after it was asked for (in the turn's check phase, or
 * when a gathering in flight is done), so it sees whatever was committed before the request,
 * as a query of its own would. Each caller gets an object of its own. A failed query fails the
 * reads it carried (all of them at once, where one query each would have failed one by one);
 * the next reads are tried afresh.
 */
export function gatherClaimReads(sql: Sql): ClaimReader {
  let waiting = new Map<string, Settle[]>();
  let scheduled = false;
  let inFlight = 0;

  function schedule(): void {
    if (scheduled || waiting.size === 0 || inFlight >= MOST_GATHERINGS_IN_FLIGHT) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      if (inFlight >= MOST_GATHERINGS_IN_FLIGHT) return;
      const gathering = waiting;
      waiting = new Map();
      inFlight += 1;
      void readTogether(gathering)
        .catch((error: unknown) => {
          // Not expected (each query's failure is settled above); never leave a read waiting.
          for (const settles of gathering.values()) {
            for (const settle of settles) settle(asError(error));
          }
        })
        .finally(() => {
          inFlight -= 1;
          schedule();
        });
    });
  }

  async function readTogether(gathering: Map<string, Settle[]>): Promise<void> {
    const ids = [...gathering.keys()];
    const parts: string[][] = [];
    for (let start = 0; start < ids.length; start += MOST_IDS_PER_QUERY) {
      parts.push(ids.slice(start, start + MOST_IDS_PER_QUERY));
    }
    await Promise.all(parts.map((part) => readPart(part, gathering)));
  }

  async function readPart(part: string[], gathering: Map<string, Settle[]>): Promise<void> {
    let answer: Map<string, ClaimDetailsRow> | Error;
    try {
      const rows = await sql<ClaimDetailsRow[]>`
        select * from app.claim_details where id = any(${part}::text[])`;
      answer = new Map();
      // The first row of an id, as `readClaim` takes it.
      for (const row of rows) if (!answer.has(row.id)) answer.set(row.id, row);
    } catch (error) {
      answer = asError(error);
    }
    for (const id of part) {
      const row = answer instanceof Error ? answer : answer.get(id);
      for (const settle of gathering.get(id) ?? []) settle(row);
    }
  }

  return (claimId) =>
    new Promise((resolve, reject) => {
      const settle: Settle = (row) => {
        if (row instanceof Error) return reject(row);
        try {
          resolve(row ? claimDetailsFromRow(row) : null);
        } catch (error) {
          reject(error);
        }
      };
      const waiters = waiting.get(claimId);
      if (waiters) waiters.push(settle);
      else waiting.set(claimId, [settle]);
      schedule();
    });
}

export function claimDetailsFromRow(row: ClaimDetailsRow): ClaimDetails {
  return {
    id: row.id,
    flow: row.flow,
    status: row.status,
    payoutAddress: row.payout_address,
    agentName: row.agent_name,
    hasEmail: row.has_email,
    amountDue: BigInt(row.amount_due),
    txHash: row.tx_hash,
    txHashSigned: row.tx_hash_signed,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    paidAt: row.paid_at,
    completedAt: row.completed_at,
    failureReason: row.failure_reason,
    payment:
      row.payment_tx !== null
        ? {
            txHash: row.payment_tx,
            logIndex: row.payment_log_index as number,
            from: row.payment_from as string,
            value: BigInt(row.payment_value as string),
            matchedBy: row.matched_by as MatchRule,
            blockNumber: row.payment_block as bigint,
          }
        : null,
    payoutTx: row.payout_tx,
  };
}

/**
 * A claim as every surface answers it: the claim, and whether its status is final
 * (api/schemas/claimStatus.ts), so that no surface decides that itself.
 */
export type GetClaimResult =
  | { type: "claim"; claim: ClaimDetails; final: boolean }
  | { type: "claim_not_found"; claimId: string };

/** The same, with the signed receipt of a completed claim (null for any other status). */
export type ClaimWithReceiptResult =
  | { type: "claim"; claim: ClaimDetails; final: boolean; receipt: StoredReceipt | null }
  | { type: "claim_not_found"; claimId: string };

/** A claim by its id, for every surface; an id that is not one in form is simply unknown. */
export async function getClaim(read: ClaimReader, claimId: string): Promise<GetClaimResult> {
  const claim = CLAIM_ID_PATTERN.test(claimId) ? await read(claimId) : null;
  return claim
    ? { type: "claim", claim, final: isFinalClaimStatus(claim.status) }
    : { type: "claim_not_found", claimId };
}

/**
 * A claim and, once it is completed, its receipt: what a page, a task or a mail shows whole.
 * The receipt is read only for a completed claim; it is null if a reorg withdrew it between
 * the two reads (the claim is then paying again: its next read says so).
 */
export async function getClaimWithReceipt(
  deps: { read: ClaimReader; sql: Sql },
  claimId: string,
): Promise<ClaimWithReceiptResult> {
  const found = await getClaim(deps.read, claimId);
  if (found.type !== "claim") return found;
  const receipt =
    found.claim.status === "completed" ? await readReceipt(deps.sql, found.claim.id) : null;
  return { ...found, receipt };
}
