import type { Sql } from "../db/connect.ts";
import type { MatchRule } from "../matching/decideMatches.ts";
import { CLAIM_ID_PATTERN } from "../schemas/inputs.ts";

export interface ClaimDetails {
  id: string;
  flow: "claim" | "x402" | "mail";
  status: "awaiting_payment" | "paid" | "paying" | "completed" | "failed" | "expired";
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

/** A row of `app.claim_details` (migration 0012), as readClaim and insertClaim get it. */
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

export type GetClaimResult =
  | { type: "claim"; claim: ClaimDetails }
  | { type: "claim_not_found"; claimId: string };

/** A claim by its id, for every surface; an id that is not one in form is simply unknown. */
export async function getClaim(sql: Sql, claimId: string): Promise<GetClaimResult> {
  const claim = CLAIM_ID_PATTERN.test(claimId) ? await readClaim(sql, claimId) : null;
  return claim ? { type: "claim", claim } : { type: "claim_not_found", claimId };
}
