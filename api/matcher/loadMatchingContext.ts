import type { IncomingTransfer } from "../chain/incomingTransfers.ts";
import type { MatchingVariant } from "../claims/qualifies.ts";
import type { Sql } from "../db/connect.ts";
import type { ClaimForMatching, MatchingContext } from "./decideMatches.ts";

interface ClaimRow {
  id: string;
  status: string;
  payout_address: string;
  amount_due: string;
  tx_hash: string | null;
  expires_at_seconds: bigint;
}

const claimColumns = (sql: Sql) =>
  sql`c.id, c.status, c.payout_address, c.amount_due, c.tx_hash,
      floor(extract(epoch from c.expires_at))::int8 as expires_at_seconds`;

function toClaim(row: ClaimRow): ClaimForMatching {
  return {
    id: row.id,
    status: row.status,
    payoutAddress: row.payout_address,
    amountDue: BigInt(row.amount_due),
    txHash: row.tx_hash,
    expiresAt: row.expires_at_seconds,
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
      select x.payer, x.nonce, ${claimColumns(sql)}
      from app.x402_payments x join app.claims c on c.id = x.claim_id
      where (x.payer, x.nonce) in (
        select * from unnest(${payers}::text[], ${nonces}::text[]))`,
    sql<ClaimRow[]>`
      select ${claimColumns(sql)} from app.claims c where c.tx_hash = any(${hashes})`,
    sql<(ClaimRow & { amount: string })[]>`
      select r.amount, ${claimColumns(sql)}
      from app.amount_reservations r join app.claims c on c.id = r.claim_id
      where r.amount = any(${amounts}::numeric[])`,
    sql<ClaimRow[]>`
      select ${claimColumns(sql)} from app.claims c
      where c.payout_address = any(${senders})
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

/** Transfers of the batch that already paid a claim (x402 settlement, an attached tx). */
export async function alreadyRecorded(
  sql: Sql,
  transfers: IncomingTransfer[],
): Promise<Set<string>> {
  const hashes = [...new Set(transfers.map((transfer) => transfer.txHash))];
  const rows = await sql<{ tx_hash: string; log_index: number }[]>`
    select tx_hash, log_index from app.payments where tx_hash = any(${hashes})
    union all
    select tx_hash, log_index from app.unmatched_transfers where tx_hash = any(${hashes})`;
  return new Set(rows.map((row) => `${row.tx_hash}:${row.log_index}`));
}
