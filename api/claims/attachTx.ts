import type { Hex } from "viem";
import { type IncomingTransfer, incomingTransfersInTx } from "../chain/incomingTransfers.ts";
import { receiptOrNull, transfersToPayTo } from "../chain/transferLogs.ts";
import type { Sql } from "../db/connect.ts";
import { verifiedPrefix } from "../matcher/verifyPayments.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { type Disqualification, disqualification } from "./qualifies.ts";

/** How an attached transaction stands: it has paid the claim, or will once it confirms. */
export type AttachedState = "matched" | "awaiting_confirmations" | "not_mined_yet";

export type AttachOutcome =
  | { type: "attached"; state: AttachedState }
  | { type: "claim_not_found" }
  | { type: "claim_expired" }
  | { type: "claim_not_open"; status: string }
  | { type: "tx_already_used" }
  | {
      type: "tx_not_qualifying";
      reason: "tx_reverted" | "no_transfer_to_pay_to" | Disqualification;
    };

export interface ClaimToAttach {
  id: string;
  status: string;
  payout_address: string;
  amount_due: string;
  tx_hash: string | null;
  expires_at: Date;
}

/** POST /api/claims/{id}/tx: names the transaction that paid (or will pay) the claim. */
export async function attachTx(
  deps: ServiceDeps,
  claimId: string,
  txHash: Hex,
): Promise<AttachOutcome> {
  return deps.sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
    const [claim] = await transaction<ClaimToAttach[]>`
      select id, status, payout_address, amount_due, tx_hash, expires_at
      from app.claims where id = ${claimId} for update`;
    if (!claim) return { type: "claim_not_found" };
    return attachTxInTransaction(transaction, deps, claim, txHash);
  });
}

/**
 * The rules of attaching, inside the caller's transaction, which must hold the `matching`
 * advisory lock (so the matcher cannot pass over the transfer at the same moment).
 * Accepted only for a transfer that meets the deployment's matching condition (SPEC.md
 * "Payment matching" 3). A transaction not mined yet is accepted; the matcher pays the claim
 * once it confirms. A transfer the matcher already passed over as unmatched pays it now.
 */
export async function attachTxInTransaction(
  transaction: Sql,
  deps: ServiceDeps,
  claim: ClaimToAttach,
  txHash: Hex,
): Promise<AttachOutcome> {
  const { config, chain } = deps;
  const hash = txHash.toLowerCase();
  if (
    claim.status === "expired" ||
    (claim.status === "awaiting_payment" && claim.expires_at < new Date())
  ) {
    return { type: "claim_expired" };
  }
  if (claim.status !== "awaiting_payment") {
    // Naming the transaction that already paid this claim again is not an error.
    if (claim.tx_hash === hash) return { type: "attached", state: "matched" };
    return { type: "claim_not_open", status: claim.status };
  }
  const [namedElsewhere] = await transaction`
    select 1 from app.claims where tx_hash = ${hash} and id <> ${claim.id}`;
  if (namedElsewhere) return { type: "tx_already_used" };

  const indexed = await incomingTransfersInTx(transaction, hash);
  let transfers: { logIndex: number; from: string; value: bigint }[] = indexed;
  if (indexed.length === 0) {
    const receipt = await receiptOrNull(chain, hash as Hex);
    if (!receipt) {
      await nameTx(transaction, claim.id, hash);
      return { type: "attached", state: "not_mined_yet" };
    }
    if (receipt.status !== "success") return { type: "tx_not_qualifying", reason: "tx_reverted" };
    transfers = transfersToPayTo(receipt, config.chain.usdcAddress, config.chain.payTo);
    if (transfers.length === 0)
      return { type: "tx_not_qualifying", reason: "no_transfer_to_pay_to" };
  }

  const consumed = new Set(
    (
      await transaction<{ log_index: number }[]>`
        select log_index from app.payments where tx_hash = ${hash}`
    ).map((row) => row.log_index),
  );
  const claimTerms = { amountDue: BigInt(claim.amount_due), payoutAddress: claim.payout_address };
  const verdicts = transfers.map((transfer) => ({
    transfer,
    problem: disqualification(config.claims.variant, PRICE_ATOMIC, claimTerms, transfer),
    consumed: consumed.has(transfer.logIndex),
  }));
  const chosen = verdicts.find((verdict) => verdict.problem === null && !verdict.consumed);
  if (!chosen) {
    const firstProblem = verdicts.find((verdict) => verdict.problem !== null)?.problem;
    if (verdicts.some((verdict) => verdict.consumed) || !firstProblem) {
      return { type: "tx_already_used" };
    }
    return { type: "tx_not_qualifying", reason: firstProblem };
  }

  await nameTx(transaction, claim.id, hash);
  const passedOver = indexed.find((transfer) => transfer.logIndex === chosen.transfer.logIndex);
  if (passedOver && (await wasPassedOver(transaction, passedOver))) {
    if (await payNow(transaction, deps, claim.id, passedOver))
      return { type: "attached", state: "matched" };
  }
  return { type: "attached", state: "awaiting_confirmations" };
}

async function nameTx(transaction: Sql, claimId: string, hash: string): Promise<void> {
  await transaction`update app.claims set tx_hash = ${hash} where id = ${claimId}`;
}

async function wasPassedOver(transaction: Sql, transfer: IncomingTransfer): Promise<boolean> {
  const [row] = await transaction`
    select 1 from app.unmatched_transfers
    where tx_hash = ${transfer.txHash} and log_index = ${transfer.logIndex}`;
  return row !== undefined;
}

/** The matcher saw this transfer before the claim named it: pay the claim from it now. */
async function payNow(
  transaction: Sql,
  deps: ServiceDeps,
  claimId: string,
  transfer: IncomingTransfer,
): Promise<boolean> {
  const { chain, config } = deps;
  const verified = await verifiedPrefix(chain, config.chain.usdcAddress, config.chain.payTo, [
    transfer,
  ]);
  if (verified !== 1) return false;
  await transaction`
    delete from app.unmatched_transfers
    where tx_hash = ${transfer.txHash} and log_index = ${transfer.logIndex}`;
  await transaction`
    insert into app.payments
      (tx_hash, log_index, claim_id, block_number, block_hash, from_address, value, matched_by)
    values (${transfer.txHash}, ${transfer.logIndex}, ${claimId}, ${String(transfer.blockNumber)},
      ${transfer.blockHash}, ${transfer.from}, ${String(transfer.value)}, 'tx_hash')`;
  await transaction`
    update app.claims set status = 'paid', paid_at = now()
    where id = ${claimId} and status = 'awaiting_payment'`;
  await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
  return true;
}
