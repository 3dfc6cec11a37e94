import type { Sql } from "../db/connect.ts";
import type { MatchRule } from "../matcher/decideMatches.ts";

export interface ClaimDetails {
  id: string;
  flow: "claim" | "x402" | "mail";
  status: "awaiting_payment" | "paid" | "paying" | "completed" | "failed" | "expired";
  payoutAddress: string;
  agentName: string | null;
  hasEmail: boolean;
  amountDue: bigint;
  txHash: string | null;
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

interface Row {
  id: string;
  flow: ClaimDetails["flow"];
  status: ClaimDetails["status"];
  payout_address: string;
  agent_name: string | null;
  has_email: boolean;
  amount_due: string;
  tx_hash: string | null;
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
  const [row] = await sql<Row[]>`
    select c.id, c.flow, c.status, c.payout_address, c.agent_name, c.email is not null as has_email,
      c.amount_due, c.tx_hash, c.created_at, c.expires_at, c.paid_at, c.completed_at,
      c.failure_reason,
      p.tx_hash as payment_tx, p.log_index as payment_log_index, p.from_address as payment_from,
      p.value as payment_value, p.matched_by, p.block_number as payment_block,
      po.tx_hash as payout_tx
    from app.claims c
    left join app.payments p on p.claim_id = c.id
    left join app.payouts po on po.claim_id = c.id
    where c.id = ${claimId}`;
  if (!row) return null;
  return {
    id: row.id,
    flow: row.flow,
    status: row.status,
    payoutAddress: row.payout_address,
    agentName: row.agent_name,
    hasEmail: row.has_email,
    amountDue: BigInt(row.amount_due),
    txHash: row.tx_hash,
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

export interface StoredReceipt {
  claimId: string;
  message: string;
  signature: string;
  signer: string;
  issuedAt: Date;
}

export async function readReceipt(sql: Sql, claimId: string): Promise<StoredReceipt | null> {
  const [row] = await sql<
    { claim_id: string; message: string; signature: string; signer: string; issued_at: Date }[]
  >`select claim_id, message, signature, signer, issued_at from app.receipts where claim_id = ${claimId}`;
  return row
    ? {
        claimId: row.claim_id,
        message: row.message,
        signature: row.signature,
        signer: row.signer,
        issuedAt: row.issued_at,
      }
    : null;
}
