import type { Hex } from "viem";
import type { Sql, Transaction } from "../db/connect.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import type { PayoutFees } from "./payoutFees.ts";

/**
 * `app.payouts` (one row per nonce the sender took for a claim) and `app.payout_attempts` (each
 * signed transaction at that nonce). The one writer of both tables
 * (ARCHITECTURE.md#one-writer-per-table); the workers decide, these functions store, each in
 * the caller's transaction where it goes with a claim's transition:
 * - (new) → signed, with its first attempt: `insertSignedPayouts` (signNewPayouts.ts), a
 *   settle-and-pay payout marked `settles_x402` (docs/payments.md#one-transaction-settlement);
 * - signed → broadcast, and each broadcast counted or its failure noted: `recordBroadcasts`,
 *   `recordBroadcastFailures` (broadcastPayouts.ts);
 * - signed / broadcast: a new attempt at higher fees, same nonce: `recordReplacement`
 *   (unstickPayouts.ts); its nonce taken by a foreign transaction: `markNonceTaken`
 *   (payoutConfirmer.ts);
 * - signed / broadcast → confirmed or reverted, naming the attempt mined and its block:
 *   `storeConfirmedTogether`, `storeMinedOutcome` (confirmPayouts.ts);
 * - confirmed / reverted: moved to another block, or final: `moveToBlock`, `markFinal`;
 *   → broadcast again when a reorg took it away or mined it with the other outcome:
 *   `reopenOtherOutcome`, `reopenReorgedOut` (watchMinedPayouts.ts), `reviveDropped`
 *   (reviveDroppedPayouts.ts);
 * - signed / broadcast → abandoned, by an operator, its nonce taken: `abandonForReissue`
 *   (reissuePayout.ts; reissueSettleAndPay.ts for a settle-and-pay payout).
 */

/** A payout signed in this round, with its first attempt. */
export interface SignedPayout {
  claimId: string;
  to: string;
  nonce: bigint;
  txHash: Hex;
  rawTx: Hex;
  /**
   * A settle-and-pay payout: its transaction also settles the claim's x402 authorization
   * (docs/payments.md#one-transaction-settlement).
   */
  settlesX402: boolean;
}

/** In the signing transaction: the round's payouts and their first attempts. */
export async function insertSignedPayouts(
  transaction: Transaction,
  payouts: SignedPayout[],
  fees: PayoutFees,
): Promise<void> {
  await transaction`
    insert into app.payouts ${transaction(
      payouts.map((payout) => ({
        claim_id: payout.claimId,
        to_address: payout.to.toLowerCase(),
        amount: PAYOUT_ATOMIC.toString(),
        nonce: payout.nonce,
        tx_hash: payout.txHash,
        raw_tx: payout.rawTx,
        settles_x402: payout.settlesX402,
      })),
    )}`;
  await transaction`
    insert into app.payout_attempts ${transaction(
      payouts.map((payout) => ({
        tx_hash: payout.txHash,
        claim_id: payout.claimId,
        nonce: payout.nonce,
        raw_tx: payout.rawTx,
        max_fee_per_gas: fees.maxFeePerGas.toString(),
        max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
      })),
    )}`;
}

/** Payouts the node accepted (or knew): `signed` → `broadcast`, one more broadcast counted. */
export async function recordBroadcasts(
  sql: Sql,
  nonces: string[],
  notes: (string | null)[],
): Promise<void> {
  if (nonces.length === 0) return;
  await sql`
    update app.payouts p
    set status = case when p.status = 'signed' then 'broadcast' else p.status end,
        broadcasts = p.broadcasts + 1,
        last_broadcast_at = now(),
        last_error = u.note
    from unnest(${sql.array(nonces)}::int8[], ${sql.array(notes as string[])}::text[])
      as u(nonce, note)
    where p.nonce = u.nonce and p.status in ('signed', 'broadcast')`;
}

/** Payouts the node refused: why, and (a broadcast one) when it was last tried. */
export async function recordBroadcastFailures(
  sql: Sql,
  nonces: string[],
  failures: string[],
): Promise<void> {
  if (nonces.length === 0) return;
  await sql`
    update app.payouts p
    set last_error = u.failure,
        last_broadcast_at = case when p.status = 'broadcast' then now() else p.last_broadcast_at end
    from unnest(${sql.array(nonces)}::int8[], ${sql.array(failures)}::text[])
      as u(nonce, failure)
    where p.nonce = u.nonce and p.status in ('signed', 'broadcast')`;
}

/** In the replacing transaction: a new attempt at the payout's nonce becomes its transaction. */
export async function recordReplacement(
  transaction: Transaction,
  replacement: {
    claimId: string;
    nonce: bigint;
    txHash: Hex;
    rawTx: Hex;
    fees: PayoutFees;
  },
): Promise<void> {
  await transaction`
    insert into app.payout_attempts
      (tx_hash, claim_id, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas)
    values (${replacement.txHash}, ${replacement.claimId}, ${replacement.nonce}, ${replacement.rawTx},
      ${replacement.fees.maxFeePerGas.toString()}, ${replacement.fees.maxPriorityFeePerGas.toString()})`;
  await transaction`
    update app.payouts
    set tx_hash = ${replacement.txHash}, raw_tx = ${replacement.rawTx}, last_error = null
    where nonce = ${replacement.nonce}`;
}

/** A live payout whose nonce a foreign transaction used; false when it was marked already. */
export async function markNonceTaken(sql: Sql, nonce: bigint): Promise<boolean> {
  const marked = await sql`
    update app.payouts
    set nonce_taken_at = now(),
      last_error = 'nonce used by a transaction that is not one of its attempts'
    where nonce = ${nonce} and status in ('signed', 'broadcast')
      and nonce_taken_at is null
    returning nonce`;
  return marked.length > 0;
}

/** A payout mined: which attempt, in which block. */
export interface MinedPayout {
  nonce: bigint;
  txHash: Hex;
  blockNumber: bigint;
  blockHash: Hex;
}

/** A round's successful payouts, `confirmed` together; returns how many were stored. */
export async function storeConfirmedTogether(sql: Sql, mined: MinedPayout[]): Promise<number> {
  const confirmed = await sql`
    update app.payouts p
    set status = 'confirmed', tx_hash = a.tx_hash, raw_tx = a.raw_tx,
      block_number = v.block_number, block_hash = v.block_hash, confirmed_at = now(),
      revert_reason = null, nonce_taken_at = null, last_error = null
    from unnest(
        ${mined.map((payout) => String(payout.nonce))}::int8[],
        ${mined.map((payout) => payout.txHash)}::text[],
        ${mined.map((payout) => String(payout.blockNumber))}::int8[],
        ${mined.map((payout) => payout.blockHash.toLowerCase())}::text[]
      ) as v(nonce, tx_hash, block_number, block_hash)
      join app.payout_attempts a on a.tx_hash = v.tx_hash
    where p.nonce = v.nonce
    returning p.nonce`;
  return confirmed.length;
}

/** One payout's outcome: `confirmed`, or `reverted` and why (`revertReason`). */
export async function storeMinedOutcome(
  sql: Sql,
  mined: MinedPayout & { kind: "success" | "reverted" },
  revertReason: string | null,
): Promise<void> {
  await sql`
    update app.payouts p
    set status = ${mined.kind === "success" ? "confirmed" : "reverted"},
        tx_hash = a.tx_hash,
        raw_tx = a.raw_tx,
        block_number = ${mined.blockNumber},
        block_hash = ${mined.blockHash.toLowerCase()},
        confirmed_at = now(),
        revert_reason = ${revertReason},
        nonce_taken_at = null,
        last_error = ${mined.kind === "reverted" ? "reverted on chain" : null}
    from app.payout_attempts a
    where p.nonce = ${mined.nonce} and a.tx_hash = ${mined.txHash}`;
}

/** A mined payout the chain mined again in another block, with the same outcome. */
export async function moveToBlock(
  sql: Sql,
  payout: { nonce: bigint; status: string },
  block: { blockNumber: bigint; blockHash: Hex },
): Promise<void> {
  await sql`
    update app.payouts set block_number = ${block.blockNumber},
      block_hash = ${block.blockHash.toLowerCase()}
    where nonce = ${payout.nonce} and status = ${payout.status}`;
}

/** Deep enough: the payout is final, watched no more. */
export async function markFinal(sql: Sql, nonce: bigint): Promise<void> {
  await sql`update app.payouts set final_at = now() where nonce = ${nonce}`;
}

/** Mined again with the other outcome after a reorg: live again, for the confirmer to store. */
export async function reopenOtherOutcome(sql: Sql, nonces: bigint[]): Promise<void> {
  await sql`
    update app.payouts
    set status = 'broadcast', block_number = null, block_hash = null, confirmed_at = null,
      revert_reason = null, last_error = 'mined again with another outcome after a reorg'
    where nonce = any(${nonces.map(String)}::int8[])
      and status in ('confirmed', 'reverted') and final_at is null`;
}

/** Taken away by a reorg, not final: live again, its stored bytes sent again by the caller. */
export async function reopenReorgedOut(sql: Sql, nonces: bigint[]): Promise<void> {
  await sql`
    update app.payouts
    set status = 'broadcast', block_number = null, block_hash = null, confirmed_at = null,
      last_error = 'reorged out; sent again'
    where nonce = any(${nonces.map(String)}::int8[])
      and status in ('confirmed', 'reverted') and final_at is null`;
}

/**
 * Taken away by a reorg deeper than PAYOUT_CONFIRMATIONS: live again (not final), only rows
 * still as they were read and still their claim's last payout. Returns those revived.
 */
export async function reviveDropped(
  sql: Sql,
  gone: { nonce: bigint; tx_hash: Hex; block_hash: string | null }[],
): Promise<{ claim_id: string; nonce: bigint; tx_hash: Hex; raw_tx: Hex }[]> {
  return sql<{ claim_id: string; nonce: bigint; tx_hash: Hex; raw_tx: Hex }[]>`
    update app.payouts p
    set status = 'broadcast', block_number = null, block_hash = null, confirmed_at = null,
      final_at = null, revert_reason = null,
      last_error = 'not on chain after a reorg deeper than PAYOUT_CONFIRMATIONS; sent again'
    from unnest(${gone.map((payout) => String(payout.nonce))}::int8[],
        ${gone.map((payout) => payout.tx_hash)}::text[],
        ${gone.map((payout) => payout.block_hash)}::text[]) as seen(nonce, tx_hash, block_hash)
    where p.nonce = seen.nonce and p.tx_hash = seen.tx_hash
      and p.status in ('confirmed', 'reverted')
      and p.block_hash is not distinct from seen.block_hash
      and not exists (
        select 1 from app.payouts later where later.claim_id = p.claim_id and later.nonce > p.nonce)
    returning p.claim_id, p.nonce, p.tx_hash, p.raw_tx`;
}

/** The operator re-issues a payout whose nonce was taken: abandoned, final; false if it changed. */
export async function abandonForReissue(transaction: Transaction, nonce: bigint): Promise<boolean> {
  const rows = await transaction`
    update app.payouts
    set status = 'abandoned', final_at = now(),
      last_error = 'nonce taken by a foreign transaction; re-issued by an operator'
    where nonce = ${nonce} and status in ('signed', 'broadcast')
    returning nonce`;
  return rows.length > 0;
}
