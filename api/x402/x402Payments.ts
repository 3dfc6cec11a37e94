import type { Database, Sql, Transaction } from "../db/connect.ts";
import { failClaim } from "../lifecycle/failClaim.ts";
import { markPaying } from "../lifecycle/markPaying.ts";
import { type MatchedPayment, recordPayments } from "../lifecycle/recordPayments.ts";
import {
  recordFailedRecord,
  recordSettledRecord,
  recordSettlementUnknown,
  recordSpentElsewhere,
} from "../lifecycle/x402Records.ts";

export type X402Status = "settling" | "settled" | "failed" | "unknown" | "lost";

export interface X402Payment {
  nonce: string;
  claimId: string;
  digest: string;
  status: X402Status;
  settlementTx: string | null;
  failureReason: string | null;
  paymentResponse: string | null;
  /** The request it was first sent with (see earnWithX402's requestFingerprint); null before 0011. */
  requestFingerprint: string | null;
  /** The payout address of the claim it paid (lowercase). */
  payoutAddress: string;
  /** When the record last changed: a `settling` one older than a settlement can take is stale. */
  updatedAt: Date;
}

type X402PaymentRow = {
  nonce: string;
  claim_id: string;
  payload_digest: string;
  status: X402Status;
  settlement_tx: string | null;
  failure_reason: string | null;
  payment_response: string | null;
  request_fingerprint: string | null;
  payout_address: string;
  updated_at: Date;
};

const x402PaymentColumns = (sql: Sql) => sql`
  x.nonce, x.claim_id, x.payload_digest, x.status, x.settlement_tx, x.failure_reason,
  x.payment_response, x.request_fingerprint, c.payout_address, x.updated_at`;

function toX402Payment(row: X402PaymentRow): X402Payment {
  return {
    nonce: row.nonce,
    claimId: row.claim_id,
    digest: row.payload_digest,
    status: row.status,
    settlementTx: row.settlement_tx,
    failureReason: row.failure_reason,
    paymentResponse: row.payment_response,
    requestFingerprint: row.request_fingerprint,
    payoutAddress: row.payout_address,
    updatedAt: row.updated_at,
  };
}

export async function readX402Payment(
  sql: Sql,
  payer: string,
  nonce: string,
): Promise<X402Payment | null> {
  const [row] = await sql<X402PaymentRow[]>`
    select ${x402PaymentColumns(sql)}
    from app.x402_payments x join app.claims c on c.id = x.claim_id
    where x.payer = ${payer} and x.nonce = ${nonce}`;
  return row ? toX402Payment(row) : null;
}

/** The payment a payer first sent with this payment-identifier id, if any. */
export async function readX402PaymentByIdentifier(
  sql: Sql,
  payer: string,
  paymentIdentifier: string,
): Promise<X402Payment | null> {
  const [row] = await sql<X402PaymentRow[]>`
    select ${x402PaymentColumns(sql)}
    from app.x402_payments x join app.claims c on c.id = x.claim_id
    where x.payer = ${payer} and x.payment_identifier = ${paymentIdentifier}`;
  return row ? toX402Payment(row) : null;
}

/** The transfer a successful settlement made, as found in its receipt. */
export type SettlementTransfer = MatchedPayment["transfer"];

/**
 * Settled: the x402 record keeps the settlement (its PAYMENT-RESPONSE is sent again on a
 * replay) and the payment is recorded against the claim (rule 1 of the matcher, in advance),
 * which makes it `paid`. When the transfer could not be read back from the RPC (`transfer`
 * null), the claim stays awaiting payment and the matcher records it from the chain, as for an
 * unknown outcome.
 */
export async function recordSettled(
  sql: Database,
  claimId: string,
  settlement: { txHash: string; paymentResponse: string },
  transfer: SettlementTransfer | null,
): Promise<void> {
  await sql.begin(async (transaction) => {
    await recordSettledRecord(transaction, claimId, settlement);
    if (!transfer) return;
    // At one block, so that the answer carries the payout; seen again at depth later.
    await recordPayments(transaction, [{ claimId, matchedBy: "x402", transfer, verified: false }]);
  });
}

/**
 * A settle-and-pay payout of this claim was mined successfully (docs/payments.md#one-transaction-settlement):
 * its authorization's transfer is the claim's payment, and the transaction is the settlement
 * PAYMENT-RESPONSE names. In the confirmer's transaction, before the claim is completed: the
 * claim is made `paid` (unless the matcher recorded the same transfer first) and then `paying`.
 */
export async function recordSettledWithPayout(
  transaction: Transaction,
  settlement: { claimId: string; paymentResponse: string; transfer: SettlementTransfer },
): Promise<void> {
  await recordSettledRecord(transaction, settlement.claimId, {
    txHash: settlement.transfer.txHash,
    paymentResponse: settlement.paymentResponse,
  });
  const [claim] = await transaction<{ status: string }[]>`
    select status from app.claims where id = ${settlement.claimId} for update`;
  if (
    claim &&
    claim.status !== "paid" &&
    claim.status !== "paying" &&
    claim.status !== "completed"
  ) {
    await recordPayments(transaction, [
      {
        claimId: settlement.claimId,
        matchedBy: "x402",
        transfer: settlement.transfer,
        verified: false,
      },
    ]);
  }
  const [now] = await transaction<{ status: string }[]>`
    select status from app.claims where id = ${settlement.claimId}`;
  if (now?.status === "paid") await markPaying(transaction, [settlement.claimId]);
}

/**
 * A settle-and-pay payout reverted at its first mining (docs/payments.md#one-transaction-settlement):
 * neither leg happened. A blacklisted recipient can never be paid: the settlement is refused
 * and the claim fails, with the payer charged nothing. Any other revert (the authorization used
 * first, expired, the allowance short) leaves the outcome to the chain, as an unknown
 * settlement: the matcher pays the claim should the verified authorization be used after all,
 * and it fails once the authorization ran out unused.
 */
export async function recordSettleWithPayoutReverted(
  transaction: Transaction,
  claimId: string,
  recipientBlacklisted: boolean,
): Promise<"failed" | "unknown" | "unchanged"> {
  const [record] = await transaction<{ status: X402Status }[]>`
    select x.status from app.x402_payments x join app.claims c on c.id = x.claim_id
    where x.claim_id = ${claimId} and c.status = 'awaiting_payment'`;
  if (!record || (record.status !== "settling" && record.status !== "unknown")) return "unchanged";
  if (recipientBlacklisted) {
    await recordFailedRecord(transaction, claimId, "payout_recipient_blacklisted");
    await failClaim(transaction, { claimId, reason: "x402_settlement_failed" });
    return "failed";
  }
  await recordSettlementUnknown(transaction, claimId, null);
  return "unknown";
}

/** Settlement refused for good: the claim fails (it never stays open), nothing was paid. */
export async function recordSettlementFailed(
  sql: Database,
  claimId: string,
  reason: string,
): Promise<void> {
  await sql.begin((transaction) => failSettlement(transaction, claimId, reason));
}

/**
 * recordSettlementFailed in the caller's transaction (the operator's re-issue of a settle-and-pay
 * whose authorization can no longer settle); false when the claim no longer awaited its payment.
 */
export async function failSettlement(
  transaction: Transaction,
  claimId: string,
  reason: string,
): Promise<boolean> {
  await recordFailedRecord(transaction, claimId, reason);
  return failClaim(transaction, { claimId, reason: "x402_settlement_failed" });
}

/**
 * The payer spent the nonce of its verified authorization on another transfer of its own (a
 * trifle sent ahead of the settlement), now at confirmation depth: the verified authorization
 * can never be settled on this chain. A settlement still open (unknown, or left settling) is
 * failed, and so is its claim, which stays payable by the verified authorization should a
 * reorg bring it after all (the matcher's x402 rule). Returns the claims that failed here.
 */
export async function recordAuthorizationSpentElsewhere(
  transaction: Transaction,
  claimIds: string[],
): Promise<string[]> {
  const closed = await recordSpentElsewhere(transaction, claimIds);
  for (const claimId of closed) {
    await failClaim(transaction, { claimId, reason: "x402_settlement_failed" });
  }
  return closed;
}
