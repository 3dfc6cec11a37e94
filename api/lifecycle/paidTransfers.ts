import type { Sql } from "../db/connect.ts";

/** A transfer as far as its identity goes (see IncomingTransfer.transferOrdinal). */
export interface TransferIdentity {
  txHash: string;
  logIndex: number;
  from: string;
  value: bigint;
  transferOrdinal: number;
  authorizationNonce: string | null;
}

/**
 * Which of these transfers already paid a claim: known by their identity (tx hash, sender,
 * value, ordinal), which survives a reorg that mines the same transaction at other log
 * indexes, or by their EIP-3009 authorization. With `orX402Authorization`, also a transfer
 * whose authorization belongs to an x402 payment in any state (it pays that claim or nothing).
 * Keys: "tx:log" of the transfers given.
 */
export async function paidTransfers(
  sql: Sql,
  transfers: TransferIdentity[],
  options: { orX402Authorization?: boolean; orUnmatchedHere?: boolean } = {},
): Promise<Set<string>> {
  if (transfers.length === 0) return new Set();
  const rows = await sql<{ tx_hash: string; log_index: number }[]>`
    select t.tx_hash, t.log_index
    from unnest(
      ${transfers.map((t) => t.txHash)}::text[], ${transfers.map((t) => t.logIndex)}::int[],
      ${transfers.map((t) => t.from)}::text[], ${transfers.map((t) => String(t.value))}::numeric[],
      ${transfers.map((t) => t.transferOrdinal)}::int[],
      ${transfers.map((t) => t.authorizationNonce)}::text[]
    ) as t (tx_hash, log_index, from_address, value, transfer_ordinal, authorization_nonce)
    where exists (
        select 1 from app.payments p
        where (p.tx_hash = t.tx_hash and p.from_address = t.from_address and p.value = t.value
            and p.transfer_ordinal = t.transfer_ordinal)
          or (t.authorization_nonce is not null and p.from_address = t.from_address
            and p.authorization_nonce = t.authorization_nonce))
      or (${options.orX402Authorization ?? false} and t.authorization_nonce is not null
        and exists (
          select 1 from app.x402_payments x
          where x.payer = t.from_address and x.nonce = t.authorization_nonce))
      or (${options.orUnmatchedHere ?? false} and exists (
        select 1 from app.unmatched_transfers u
        where u.tx_hash = t.tx_hash and u.log_index = t.log_index))`;
  return new Set(rows.map((row) => `${row.tx_hash}:${row.log_index}`));
}
