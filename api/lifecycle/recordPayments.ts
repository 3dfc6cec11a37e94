/**
 * What each transfer to pay_to paid: a claim (`app.payments`) or nothing
 * (`app.unmatched_transfers`). The one writer of both tables
 * (ARCHITECTURE.md#one-writer-per-table): a payment is recorded (`recordPayments`) and follows
 * its settlement's transfer after a reorg (`followSettlementTransfer`); an unmatched transfer is
 * recorded (`recordUnmatchedTransfers`), removed once a payment records it, and forgotten above
 * a rewind's split (`forgetUnmatchedTransfersAfter`).
 */
import type { Sql, Transaction } from "../db/connect.ts";
import type { MatchRule } from "../matching/decideMatches.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { recordSettledByPayments } from "./x402Records.ts";

/** An incoming transfer, as the chain has it, that pays one claim. */
export interface MatchedPayment {
  claimId: string;
  matchedBy: MatchRule;
  transfer: {
    txHash: string;
    logIndex: number;
    blockNumber: bigint;
    blockHash: string;
    from: string;
    value: bigint;
    /** See IncomingTransfer.transferOrdinal. */
    transferOrdinal: number;
    /** The EIP-3009 authorization the transfer used, if any. */
    authorizationNonce: string | null;
  };
  /** The transfer was seen at CONFIRMATIONS depth (the matcher's, attach's); not an x402 settlement at one block. */
  verified: boolean;
}

/** A transfer to pay_to the matcher decided pays no claim, and why (`reason`, the claim it fell short of). */
export interface UnmatchedTransferRow {
  tx_hash: string;
  log_index: number;
  block_number: string;
  from_address: string;
  value: string;
  reason: string;
  claim_id: string | null;
}

/** The claims a batch was decided on changed under it: roll back and decide again. */
export class ClaimsChangedError extends Error {
  constructor(expected: number, changed: number) {
    super(`${changed} of ${expected} claims could be marked paid; the batch is rolled back`);
    this.name = "ClaimsChangedError";
  }
}

/**
 * awaiting_payment → paid (or expired → paid, for a transfer mined before the claim expired;
 * or failed → paid, for an x402 claim whose settlement was called failed and whose
 * authorization the chain shows after all): the ONE writer of this transition, for the
 * matcher, for attaching a tx hash and for an x402 settlement alike. In the caller's
 * transaction: the payments are inserted (a transfer, known by its identity or its
 * authorization, pays at most one claim, a claim is paid by at most one transfer: the table's
 * keys), a transfer once recorded as unmatched is no longer so, the claims become `paid`, an
 * x402 claim's record says settled, and the payout sender is woken on commit. An x402 claim
 * is paid by its authorization and by nothing else; nothing else is paid by one.
 *
 * A payment already on record is skipped (a replay). A claim that cannot move to `paid` means
 * somebody changed it since the caller decided: ClaimsChangedError, and the caller's
 * transaction must roll back. Returns the ids of the claims that became paid.
 */
export async function recordPayments(
  transaction: Transaction,
  payments: MatchedPayment[],
): Promise<string[]> {
  if (payments.length === 0) return [];
  const rows = payments.map((payment) => ({
    tx_hash: payment.transfer.txHash,
    log_index: payment.transfer.logIndex,
    claim_id: payment.claimId,
    block_number: String(payment.transfer.blockNumber),
    block_hash: payment.transfer.blockHash,
    from_address: payment.transfer.from,
    value: String(payment.transfer.value),
    matched_by: payment.matchedBy,
    transfer_ordinal: payment.transfer.transferOrdinal,
    authorization_nonce: payment.transfer.authorizationNonce,
    verified_at: payment.verified ? new Date() : null,
  }));
  const inserted = await transaction<
    {
      claim_id: string;
      tx_hash: string;
      matched_by: string;
      from_address: string;
      value: string;
      authorization_nonce: string | null;
    }[]
  >`
    insert into app.payments ${transaction(rows)}
    on conflict do nothing
    returning claim_id, tx_hash, matched_by, from_address, value::text, authorization_nonce`;
  if (inserted.length === 0) return [];
  await transaction`
    delete from app.unmatched_transfers u
    using unnest(${rows.map((row) => row.tx_hash)}::text[], ${rows.map((row) => row.log_index)}::int[])
      as paid (tx_hash, log_index)
    where u.tx_hash = paid.tx_hash and u.log_index = paid.log_index`;

  const claimIds = inserted.map((row) => row.claim_id);
  // An x402 claim is paid only by the authorization the service verified for it: the same
  // payer, nonce and value (DESIGN.md §12); any other use of its nonce is refused here too,
  // whoever decided it.
  const updated = await transaction<{ id: string }[]>`
    update app.claims c set status = 'paid', paid_at = now(), failure_reason = null
    from unnest(${claimIds}::text[], ${inserted.map((row) => row.matched_by)}::text[],
      ${inserted.map((row) => row.from_address)}::text[],
      ${inserted.map((row) => row.value)}::numeric[],
      ${inserted.map((row) => row.authorization_nonce)}::text[])
      as paid (claim_id, matched_by, from_address, value, authorization_nonce)
    where c.id = paid.claim_id
      and (c.flow = 'x402') = (paid.matched_by = 'x402')
      and (paid.matched_by <> 'x402' or exists (
        select 1 from app.x402_payments x
        where x.claim_id = c.id and x.payer = paid.from_address
          and x.nonce = paid.authorization_nonce and x.authorized_value = paid.value))
      and (c.status in ('awaiting_payment', 'expired')
        or (c.status = 'failed' and c.failure_reason = 'x402_settlement_failed'))
    returning c.id`;
  if (updated.length !== claimIds.length) {
    throw new ClaimsChangedError(claimIds.length, updated.length);
  }

  await recordSettledByPayments(
    transaction,
    inserted.filter((row) => row.matched_by === "x402"),
  );
  await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
  return claimIds;
}

/**
 * In the matcher's transaction: transfers that paid no claim, with their reason; one recorded
 * already is left as it is. A payment recorded later for one of them removes it (above).
 */
export async function recordUnmatchedTransfers(
  transaction: Transaction,
  unmatched: UnmatchedTransferRow[],
): Promise<void> {
  if (unmatched.length === 0) return;
  await transaction`
    insert into app.unmatched_transfers ${transaction(unmatched)}
    on conflict (tx_hash, log_index) do nothing`;
}

/** In the matcher's rewinding transaction: the unmatched transfers above `blockNumber` go. */
export async function forgetUnmatchedTransfersAfter(
  transaction: Transaction,
  blockNumber: bigint,
): Promise<void> {
  await transaction`
    delete from app.unmatched_transfers where block_number > ${String(blockNumber)}`;
}

/**
 * An x402 settlement found again, at depth, by its authorization: its payment record follows
 * the transfer to where the chain has it now (a reorg may have moved it) and is verified.
 */
export async function followSettlementTransfer(
  sql: Sql,
  claimId: string,
  transfer: {
    txHash: string;
    logIndex: number;
    blockNumber: bigint;
    blockHash: string;
    transferOrdinal: number;
  },
): Promise<void> {
  await sql`
    update app.payments
    set tx_hash = ${transfer.txHash}, log_index = ${transfer.logIndex},
      block_number = ${String(transfer.blockNumber)}, block_hash = ${transfer.blockHash},
      transfer_ordinal = ${transfer.transferOrdinal}, verified_at = now()
    where claim_id = ${claimId}`;
}
