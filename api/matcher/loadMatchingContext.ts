import type { IncomingTransfer } from "../chain/incomingTransfers.ts";
import type { Sql } from "../db/connect.ts";
import { paidTransfers } from "../lifecycle/paidTransfers.ts";
import type { ClaimForMatching, MatchingContext } from "../matching/decideMatches.ts";
import type { MatchingVariant } from "../matching/qualifies.ts";

interface ClaimRow {
  id: string;
  flow: ClaimForMatching["flow"];
  status: string;
  failure_reason: string | null;
  payout_address: string;
  amount_due: string;
  tx_hash: string | null;
  tx_hash_signed: boolean;
  expires_at_seconds: bigint;
  /** Only where the x402 record is joined. */
  authorized_value?: string | null;
}

const claimColumns = (sql: Sql) =>
  sql`c.id, c.flow, c.status, c.failure_reason, c.payout_address, c.amount_due, c.tx_hash,
      c.tx_hash_signed, floor(extract(epoch from c.expires_at))::int8 as expires_at_seconds`;

function toClaim(row: ClaimRow): ClaimForMatching {
  return {
    id: row.id,
    flow: row.flow,
    status: row.status,
    failureReason: row.failure_reason,
    payoutAddress: row.payout_address,
    amountDue: BigInt(row.amount_due),
    txHash: row.tx_hash,
    txHashSigned: row.tx_hash_signed,
    expiresAt: row.expires_at_seconds,
    authorizedValue: row.authorized_value ? BigInt(row.authorized_value) : null,
  };
}

/**
 * Everything the rules need for one batch, in a handful of set-based reads: the claims named
 * by the batch's tx hashes, holding its amounts (variant A), or paid out to its senders.
 */
export async function loadMatchingContext(
  sql: Sql,
  transfers: IncomingTransfer[],
  settings: { variant: MatchingVariant; price: bigint },
): Promise<MatchingContext> {
  const hashes = [...new Set(transfers.map((transfer) => transfer.txHash))];
  const amounts =
    settings.variant === "A"
      ? [...new Set(transfers.map((transfer) => String(transfer.value)))]
      : [];
  const senders = [
    ...new Set(
      transfers
        .filter((transfer) => transfer.value >= settings.price)
        .map((transfer) => transfer.from),
    ),
  ];
  let oldestBlockTime = transfers[0]?.blockTimestamp ?? 0n;
  for (const transfer of transfers) {
    if (transfer.blockTimestamp < oldestBlockTime) oldestBlockTime = transfer.blockTimestamp;
  }

  const authorized = transfers.filter((transfer) => transfer.authorizationNonce !== null);
  const payers = authorized.map((transfer) => transfer.from);
  const nonces = authorized.map((transfer) => transfer.authorizationNonce as string);

  const [byAuthorization, named, reserved, bySender] = await Promise.all([
    sql<(ClaimRow & { payer: string; nonce: string })[]>`
      select x.payer, x.nonce, x.authorized_value::text, ${claimColumns(sql)}
      from app.x402_payments x join app.claims c on c.id = x.claim_id
      where (x.payer, x.nonce) in (
        select * from unnest(${payers}::text[], ${nonces}::text[]))`,
    // x402 claims are paid by their authorization only: never by a hash, an amount or a sender.
    sql<ClaimRow[]>`
      select ${claimColumns(sql)} from app.claims c
      where c.tx_hash = any(${hashes}) and c.flow <> 'x402'`,
    sql<(ClaimRow & { amount: string })[]>`
      select r.amount, ${claimColumns(sql)}
      from app.amount_reservations r join app.claims c on c.id = r.claim_id
      where r.amount = any(${amounts}::numeric[]) and c.flow <> 'x402'`,
    sql<ClaimRow[]>`
      select ${claimColumns(sql)} from app.claims c
      where c.payout_address = any(${senders}) and c.flow <> 'x402'
        and (c.status = 'awaiting_payment'
          or (c.status = 'expired' and c.expires_at >= to_timestamp(${String(oldestBlockTime)})))
      order by c.created_at, c.id`,
  ]);

  const context: MatchingContext = {
    variant: settings.variant,
    price: settings.price,
    byAuthorization: new Map(
      byAuthorization.map((row) => [`${row.payer}:${row.nonce}`, toClaim(row)]),
    ),
    byTxHash: new Map(named.map((row) => [row.tx_hash as string, toClaim(row)])),
    byAmount: new Map(reserved.map((row) => [BigInt(row.amount), toClaim(row)])),
    bySender: new Map(),
  };
  for (const row of bySender) {
    const list = context.bySender.get(row.payout_address) ?? [];
    list.push(toClaim(row));
    context.bySender.set(row.payout_address, list);
  }
  return context;
}

/**
 * Transfers of the batch already decided: paid a claim (by identity or authorization), or
 * recorded as unmatched at this very position. Keys: "tx:log".
 */
export function alreadyRecorded(sql: Sql, transfers: IncomingTransfer[]): Promise<Set<string>> {
  return paidTransfers(sql, transfers, { orUnmatchedHere: true });
}
