import type { Hex } from "viem";
import type { Sql } from "../db/connect.ts";
import type { PayoutTx } from "./signNewPayouts.ts";

interface PayoutRow {
  claim_id: string;
  nonce: bigint;
  tx_hash: Hex;
  raw_tx: Hex;
}

const toPayoutTx = (row: PayoutRow): PayoutTx => ({
  claimId: row.claim_id,
  nonce: row.nonce,
  txHash: row.tx_hash,
  rawTx: row.raw_tx,
});

/** Payouts signed or broadcast whose outcome is not stored yet, lowest nonce first. */
export async function readUnfinishedPayouts(sql: Sql): Promise<PayoutTx[]> {
  const rows = await sql<PayoutRow[]>`
    select claim_id, nonce, tx_hash, raw_tx from app.payouts
    where status in ('signed', 'broadcast') order by nonce`;
  return rows.map(toPayoutTx);
}

/** Payouts stored but never accepted by a node, lowest nonce first. */
export async function readSignedPayouts(sql: Sql, limit: number): Promise<PayoutTx[]> {
  const rows = await sql<PayoutRow[]>`
    select claim_id, nonce, tx_hash, raw_tx from app.payouts
    where status = 'signed' order by nonce limit ${limit}`;
  return rows.map(toPayoutTx);
}

/**
 * Whether any claim waits for a payout to be signed: `paid`, or `paying` with no live payout
 * and its last one final (reverted for a reason that passes, or re-issued by an operator), or
 * an x402 authorization waits to be settled with its payout (again, once its first settle-and-pay
 * was abandoned by an operator's re-issue).
 */
export async function hasClaimsToPay(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ any: boolean }[]>`
    select exists (select 1 from app.claims where status = 'paid')
      or exists (
        select 1 from app.x402_payments x
        join app.claims c on c.id = x.claim_id and c.status = 'awaiting_payment'
        where x.status in ('settling', 'unknown') and x.settle_with_payout
          and not exists (
            select 1 from app.payouts o where o.claim_id = x.claim_id and o.status <> 'abandoned'))
      or exists (
        select 1 from app.payouts p
        join app.claims c on c.id = p.claim_id and c.status = 'paying'
        where p.status in ('reverted', 'abandoned') and p.final_at is not null
          and not exists (
            select 1 from app.payouts o where o.claim_id = p.claim_id
              and (o.status in ('signed', 'broadcast', 'confirmed') or o.final_at is null))
      ) as any`;
  return row?.any ?? false;
}

/** Whether any payout is signed or broadcast and its outcome not stored yet. */
export async function hasUnfinishedPayouts(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ any: boolean }[]>`
    select exists (select 1 from app.payouts where status in ('signed', 'broadcast')) as any`;
  return row?.any ?? false;
}

/**
 * Whether a payout is stored as mined at a nonce the chain has not reached: another wallet
 * behind the key, a reset chain or a deep reorg. New nonces from this database would then
 * leave a gap.
 */
export async function payoutsAheadOfChain(sql: Sql, latestNonce: bigint): Promise<boolean> {
  const [row] = await sql<{ found: boolean }[]>`
    select exists (
      select 1 from app.payouts
      where status in ('confirmed', 'reverted') and nonce >= ${latestNonce}
    ) as found`;
  return row?.found ?? false;
}
