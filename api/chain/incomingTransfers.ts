import type { Sql } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";

/** A USDC transfer to pay_to as the indexer recorded it (read from the `chain` views). */
export interface IncomingTransfer {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  blockTimestamp: bigint;
  from: string;
  value: bigint;
  authorizationNonce: string | null;
  /**
   * 1 for the first transfer of this transaction with this sender and value, 2 for the second:
   * with the tx hash, sender and value, what identifies the transfer even when a reorg mines
   * the transaction again at other log indexes.
   */
  transferOrdinal: number;
}

interface Row {
  tx_hash: string;
  log_index: number;
  block_number: string;
  block_hash: string;
  block_timestamp: string;
  from: string;
  value: string;
  authorization_nonce: string | null;
  transfer_ordinal: number;
}

function fromRow(row: Row): IncomingTransfer {
  return {
    txHash: row.tx_hash,
    logIndex: row.log_index,
    blockNumber: BigInt(row.block_number),
    blockHash: row.block_hash,
    blockTimestamp: BigInt(row.block_timestamp),
    from: row.from,
    value: BigInt(row.value),
    authorizationNonce: row.authorization_nonce,
    transferOrdinal: row.transfer_ordinal,
  };
}

/** Until Ponder has created its views there is nothing indexed: an empty list, not an error. */
async function untilIndexed<T>(query: Promise<T[]>): Promise<T[]> {
  try {
    return await query;
  } catch (error) {
    if (hasSqlState(error, SQL_STATE.undefinedTable)) return [];
    throw error;
  }
}

async function orNothing(query: Promise<Row[]>): Promise<IncomingTransfer[]> {
  return (await untilIndexed(query)).map(fromRow);
}

/** The columns of a transfer row `t`, its ordinal counted over the whole transaction. */
const transferColumns = (sql: Sql) => sql`
  tx_hash, log_index, block_number, block_hash, block_timestamp, "from", value,
  authorization_nonce,
  (select count(*)::int + 1 from chain.incoming_transfer same
    where same.tx_hash = t.tx_hash and same."from" = t."from" and same.value = t.value
      and same.log_index < t.log_index) as transfer_ordinal`;

/** Transfers after (block, log index) `after`, up to block `throughBlock`, oldest first. */
export function incomingTransfersAfter(
  sql: Sql,
  after: { blockNumber: bigint; logIndex: number },
  throughBlock: bigint,
  limit: number,
): Promise<IncomingTransfer[]> {
  return orNothing(sql<Row[]>`
    select ${transferColumns(sql)}
    from chain.incoming_transfer t
    where (block_number, log_index) > (${String(after.blockNumber)}::numeric, ${after.logIndex})
      and block_number <= ${String(throughBlock)}::numeric
    order by block_number, log_index
    limit ${limit}`);
}

/** The transfers that used one EIP-3009 authorization (one, unless the indexer holds a stale row). */
export function incomingTransfersByAuthorization(
  sql: Sql,
  from: string,
  authorizationNonce: string,
): Promise<IncomingTransfer[]> {
  return orNothing(sql<Row[]>`
    select ${transferColumns(sql)}
    from chain.incoming_transfer t
    where "from" = ${from} and authorization_nonce = ${authorizationNonce}
    order by block_number, log_index`);
}

export function incomingTransfersInTx(sql: Sql, txHash: string): Promise<IncomingTransfer[]> {
  return orNothing(sql<Row[]>`
    select ${transferColumns(sql)}
    from chain.incoming_transfer t
    where tx_hash = ${txHash}
    order by log_index`);
}

/**
 * The blocks after `afterBlock`, up to `throughBlock`, that hold indexed transfers to pay_to,
 * lowest first: what the matcher reads ahead of their confirmation.
 */
export async function blocksWithTransfers(
  sql: Sql,
  afterBlock: bigint,
  throughBlock: bigint,
  limit: number,
): Promise<bigint[]> {
  const rows = await untilIndexed(sql<{ block: string }[]>`
    select block_number::text as block from chain.incoming_transfer
    where block_number > ${String(afterBlock)}::numeric
      and block_number <= ${String(throughBlock)}::numeric
    group by block_number
    order by block_number
    limit ${limit}`);
  return rows.map((row) => BigInt(row.block));
}
