import type { Sql } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";

/**
 * The newest block the indexer has fully processed for this chain, from Ponder's checkpoint
 * (through the `chain` views). Null until Ponder has finished its backfill and created the
 * views. A checkpoint is a fixed-width string: 10 digits of timestamp, 16 of chain id, then
 * 16 of block number.
 */
export async function readIndexedBlock(sql: Sql, chainId: number): Promise<bigint | null> {
  try {
    const [row] = await sql<{ block: bigint }[]>`
      select substring(latest_checkpoint from 27 for 16)::int8 as block
      from chain._ponder_checkpoint
      where chain_id = ${chainId}`;
    return row ? row.block : null;
  } catch (error) {
    if (hasSqlState(error, SQL_STATE.undefinedTable)) return null;
    throw error;
  }
}
