import type { Sql, Transaction } from "../db/connect.ts";

/**
 * `app.x402_payments`: one record per x402 authorization, born with its claim. The one writer
 * of the table (ARCHITECTURE.md#one-writer-per-table); each function is one transition, in the
 * caller's transaction where it goes with a claim's:
 * - (new) → settling: `recordAuthorization`, in the claim's creating transaction (to be settled
 *   by the facilitator, or with its payout by the payout sender: settle_with_payout);
 * - → settled: `recordSettledRecord` (the facilitator's answer, or a settle-and-pay payout mined
 *   successfully, from the confirmer through x402Payments.ts `recordSettledWithPayout`), and
 *   `recordSettledByPayments` when its transfer pays the claim (from recordPayments);
 * - → failed: `recordFailedRecord` (the settlement refused, or an unknown one expired unsettled,
 *   or a settle-and-pay payout reverted because the token blacklists its recipient);
 * - settling / unknown (or settled without a payment) → failed: `recordSpentElsewhere`;
 * - settling → unknown: `recordSettlementUnknown` (also a settle-and-pay payout reverted for
 *   any other reason, or not mined within the request's wait), `recordStaleSettlingsUnknown`;
 * - any but lost → lost: `recordLostRecord` (the settlement dropped out of the chain for good).
 * The claim transitions that go with them are lifecycle's other files', called by
 * api/x402/x402Payments.ts in the same transaction.
 */

/** Inside the claim's creating transaction: the authorization belongs to this claim. */
export async function recordAuthorization(
  transaction: Transaction,
  entry: {
    payer: string;
    nonce: string;
    claimId: string;
    digest: string;
    /** The verified authorization's value: only a transfer of it pays the claim. */
    value: bigint;
    paymentHeader: string;
    paymentIdentifier: string | null;
    requestFingerprint: string;
    /**
     * Settled by the payout sender in its payout's transaction, not by the facilitator
     * (docs/payments.md#one-transaction-settlement).
     */
    settleWithPayout: boolean;
  },
): Promise<void> {
  // The signed authorization is kept: should its settlement drop out of the chain, the
  // settlement watcher can settle it again (it can only ever pay pay_to, once).
  await transaction`
    insert into app.x402_payments
      (payer, nonce, claim_id, payload_digest, authorized_value, payment_header,
        payment_identifier, request_fingerprint, settle_with_payout)
    values (${entry.payer}, ${entry.nonce}, ${entry.claimId}, ${entry.digest},
      ${String(entry.value)}, ${entry.paymentHeader}, ${entry.paymentIdentifier},
      ${entry.requestFingerprint}, ${entry.settleWithPayout})`;
}

/** The facilitator settled: the record keeps the settlement and its PAYMENT-RESPONSE. */
export async function recordSettledRecord(
  transaction: Transaction,
  claimId: string,
  settlement: { txHash: string; paymentResponse: string },
): Promise<void> {
  await transaction`
    update app.x402_payments
    set status = 'settled', settlement_tx = ${settlement.txHash},
      payment_response = ${settlement.paymentResponse}, updated_at = now()
    where claim_id = ${claimId}`;
}

/** The records of x402 claims a transfer just paid (recordPayments) say settled, by it. */
export async function recordSettledByPayments(
  transaction: Transaction,
  settled: { claim_id: string; tx_hash: string }[],
): Promise<void> {
  if (settled.length === 0) return;
  await transaction`
    update app.x402_payments x
    set status = 'settled', settlement_tx = settled.tx_hash, updated_at = now()
    from unnest(${settled.map((row) => row.claim_id)}::text[],
      ${settled.map((row) => row.tx_hash)}::text[]) as settled (claim_id, tx_hash)
    where x.claim_id = settled.claim_id
      and x.status in ('settling', 'unknown', 'settled', 'failed', 'lost')`;
}

/** Settlement refused for good (or expired unsettled): the record says why. */
export async function recordFailedRecord(
  transaction: Transaction,
  claimId: string,
  reason: string,
): Promise<void> {
  await transaction`
    update app.x402_payments
    set status = 'failed', failure_reason = ${reason}, updated_at = now()
    where claim_id = ${claimId}`;
}

/**
 * The payer spent the verified authorization's nonce on another transfer, confirmed: the
 * records still open (unknown, settling, or settled without a payment) fail. Returns the
 * claims whose record failed here.
 */
export async function recordSpentElsewhere(
  transaction: Transaction,
  claimIds: string[],
): Promise<string[]> {
  if (claimIds.length === 0) return [];
  const closed = await transaction<{ claim_id: string }[]>`
    update app.x402_payments
    set status = 'failed', failure_reason = 'authorization_spent_elsewhere', updated_at = now()
    where claim_id = any(${claimIds})
      and (status in ('settling', 'unknown')
        -- settled, but its transfer never read back (no payment): the claim still waits
        or (status = 'settled' and not exists (
          select 1 from app.payments p where p.claim_id = x402_payments.claim_id)))
    returning claim_id`;
  return closed.map((row) => row.claim_id);
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

/**
 * Records left `settling` longer than a settlement can take belong to a process that died
 * mid-way (a SIGKILL between recording and settling): their outcome is unknown, as a replay
 * would find. Without this, a payer who never sends the payment again leaves the record
 * `settling` and the claim open until it expires, with nobody told.
 */
export async function recordStaleSettlingsUnknown(sql: Sql, settleTimeoutMs: number) {
  const stale = await sql<{ claim_id: string }[]>`
    update app.x402_payments set status = 'unknown', updated_at = now()
    where status = 'settling'
      and updated_at < now() - make_interval(secs => ${(settleTimeoutMs + STALE_MARGIN_MS) / 1000})
    returning claim_id`;
  return stale.map((row) => row.claim_id);
}

/** Beyond the settle timeout, before a `settling` record counts as abandoned. */
export const STALE_MARGIN_MS = 5_000;

/** The settlement dropped out of the chain and can no longer be settled: `lost`, and why. */
export async function recordLostRecord(sql: Sql, claimId: string, reason: string): Promise<void> {
  await sql`
    update app.x402_payments
    set status = 'lost', failure_reason = ${reason}, updated_at = now()
    where claim_id = ${claimId} and status <> 'lost'`;
}
