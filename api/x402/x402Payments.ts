import type { Database, Sql } from "../db/connect.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";

export type X402Status = "settling" | "settled" | "failed" | "unknown";

export interface X402Payment {
  claimId: string;
  digest: string;
  status: X402Status;
  settlementTx: string | null;
  failureReason: string | null;
  paymentResponse: string | null;
  /** When the record last changed: a `settling` one older than a settlement can take is stale. */
  updatedAt: Date;
}

export async function readX402Payment(
  sql: Sql,
  payer: string,
  nonce: string,
): Promise<X402Payment | null> {
  const [row] = await sql<
    {
      claim_id: string;
      payload_digest: string;
      status: X402Status;
      settlement_tx: string | null;
      failure_reason: string | null;
      payment_response: string | null;
      updated_at: Date;
    }[]
  >`
    select claim_id, payload_digest, status, settlement_tx, failure_reason, payment_response,
      updated_at
    from app.x402_payments where payer = ${payer} and nonce = ${nonce}`;
  return row
    ? {
        claimId: row.claim_id,
        digest: row.payload_digest,
        status: row.status,
        settlementTx: row.settlement_tx,
        failureReason: row.failure_reason,
        paymentResponse: row.payment_response,
        updatedAt: row.updated_at,
      }
    : null;
}

/** Inside the claim's creating transaction: the authorization belongs to this claim. */
export async function recordAuthorization(
  transaction: Sql,
  entry: { payer: string; nonce: string; claimId: string; digest: string },
): Promise<void> {
  await transaction`
    insert into app.x402_payments (payer, nonce, claim_id, payload_digest)
    values (${entry.payer}, ${entry.nonce}, ${entry.claimId}, ${entry.digest})`;
}

/** The transfer a successful settlement made, as found in its receipt. */
export interface SettlementTransfer {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  from: string;
  value: bigint;
}

/**
 * Settled: the payment is recorded against the claim (rule 1 of the matcher, in advance),
 * the claim becomes `paid` and the payout sender is woken. When the transfer could not be
 * read back from the RPC (`transfer` null), the claim stays awaiting payment and the matcher
 * records it from the chain, as for an unknown outcome.
 */
export async function recordSettled(
  sql: Database,
  claimId: string,
  settlement: { txHash: string; paymentResponse: string },
  transfer: SettlementTransfer | null,
): Promise<void> {
  await sql.begin(async (transaction) => {
    await transaction`
      update app.x402_payments
      set status = 'settled', settlement_tx = ${settlement.txHash},
        payment_response = ${settlement.paymentResponse}, updated_at = now()
      where claim_id = ${claimId}`;
    if (!transfer) return;
    const inserted = await transaction`
      insert into app.payments
        (tx_hash, log_index, claim_id, block_number, block_hash, from_address, value, matched_by)
      values (${transfer.txHash}, ${transfer.logIndex}, ${claimId}, ${String(transfer.blockNumber)},
        ${transfer.blockHash}, ${transfer.from}, ${String(transfer.value)}, 'x402')
      on conflict do nothing
      returning claim_id`;
    if (inserted.length === 0) return;
    await transaction`
      update app.claims set status = 'paid', paid_at = now()
      where id = ${claimId} and status in ('awaiting_payment', 'expired')`;
    await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
  });
}

/** Settlement refused for good: the claim fails (it never stays open), nothing was paid. */
export async function recordSettlementFailed(
  sql: Database,
  claimId: string,
  reason: string,
): Promise<void> {
  await sql.begin(async (transaction) => {
    await transaction`
      update app.x402_payments
      set status = 'failed', failure_reason = ${reason}, updated_at = now()
      where claim_id = ${claimId}`;
    await transaction`
      update app.claims set status = 'failed', failure_reason = 'x402_settlement_failed'
      where id = ${claimId} and status = 'awaiting_payment'`;
  });
}

/** The outcome is unknown (timeout, facilitator gone mid-settle): the chain will tell. */
export async function recordSettlementUnknown(
  sql: Sql,
  claimId: string,
  txHash: string | null,
): Promise<void> {
  await sql`
    update app.x402_payments
    set status = 'unknown', settlement_tx = coalesce(${txHash}, settlement_tx), updated_at = now()
    where claim_id = ${claimId} and status = 'settling'`;
}
