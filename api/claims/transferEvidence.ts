import type { Hex, PublicClient } from "viem";
import { type IncomingTransfer, incomingTransfersInTx } from "../chain/incomingTransfers.ts";
import { receiptOrNull, transfersToPayTo } from "../chain/transferLogs.ts";
import { verifiedPrefix } from "../chain/verifyTransfers.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";

/**
 * One USDC transfer to pay_to in the named transaction, as the index or the chain has it (its
 * `blockTimestamp` decides whether it came before a claim's expiry).
 */
export interface EvidenceTransfer extends IncomingTransfer {
  /** The chain, asked just now, has it in a successful transaction in the same block. */
  canonical: boolean;
}

export type TransferEvidence =
  | { kind: "not_mined" }
  | { kind: "reverted" }
  | { kind: "mined"; transfers: EvidenceTransfer[] };

/**
 * What the index and the chain say of a transaction, read BEFORE any transaction or lock is
 * taken: attaching decides under the matching lock from this and the database alone, so a slow
 * RPC never holds a connection or the lock.
 */
export async function readTransferEvidence(
  deps: { sql: Sql; chain: PublicClient; config: Pick<ServiceConfig, "chain"> },
  txHash: Hex,
): Promise<TransferEvidence> {
  const { sql, chain, config } = deps;
  const indexed = await incomingTransfersInTx(sql, txHash);
  if (indexed.length > 0) {
    const verified = await verifiedPrefix(
      chain,
      config.chain.usdcAddress,
      config.chain.payTo,
      indexed,
    );
    return {
      kind: "mined",
      transfers: indexed.map((transfer, index) => ({
        ...transfer,
        canonical: index < verified,
      })),
    };
  }
  const receipt = await receiptOrNull(chain, txHash);
  if (!receipt) return { kind: "not_mined" };
  if (receipt.status !== "success") return { kind: "reverted" };
  const transfers = transfersToPayTo(receipt, config.chain.usdcAddress, config.chain.payTo);
  if (transfers.length === 0) return { kind: "mined", transfers: [] };
  const block = await chain.getBlock({ blockNumber: receipt.blockNumber });
  return {
    kind: "mined",
    transfers: transfers.map((transfer) => ({
      ...transfer,
      blockTimestamp: block.timestamp,
      canonical: true,
    })),
  };
}
