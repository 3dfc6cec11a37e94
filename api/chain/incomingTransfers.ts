import type { Sql } from "../db/connect.ts";

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
}

const UNDEFINED_TABLE = "42P01";

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
  };
}

/** Until Ponder has created its views there is nothing indexed: an empty list, not an error. */
async function orNothing(query: Promise<Row[]>): Promise<IncomingTransfer[]> {
  try {
    return (await query).map(fromRow);
  } catch (error) {
    if ((error as { code?: string }).code === UNDEFINED_TABLE) return [];
    throw error;
  }
}

/** Transfers after (block, log index) `after`, up to block `throughBlock`, oldest first. */
export function incomingTransfersAfter(
  sql: Sql,
  after: { blockNumber: bigint; logIndex: number },
  throughBlock: bigint,
  limit: number,
): Promise<IncomingTransfer[]> {
  return orNothing(sql<Row[]>`
    select tx_hash, log_index, block_number, block_hash, block_timestamp, "from", value,
      authorization_nonce
    from chain.incoming_transfer
    where (block_number, log_index) > (${String(after.blockNumber)}::numeric, ${after.logIndex})
      and block_number <= ${String(throughBlock)}::numeric
    order by block_number, log_index
    limit ${limit}`);
}

export function incomingTransfersInTx(sql: Sql, txHash: string): Promise<IncomingTransfer[]> {
  return orNothing(sql<Row[]>`
    select tx_hash, log_index, block_number, block_hash, block_timestamp, "from", value,
      authorization_nonce
    from chain.incoming_transfer
    where tx_hash = ${txHash}
    order by log_index`);
}
