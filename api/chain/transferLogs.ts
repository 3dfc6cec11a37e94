import {
  type Address,
  decodeEventLog,
  type Hex,
  type Log,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";

/** A USDC Transfer log to `payTo` in a mined transaction, as the chain reports it now. */
export interface TransferLog {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  from: string;
  to: string;
  value: bigint;
}

/** The USDC transfers to `payTo` in a receipt (lowercase addresses and hashes). */
export function transfersToPayTo(
  receipt: Pick<TransactionReceipt, "logs" | "transactionHash" | "blockNumber" | "blockHash">,
  usdc: Address,
  payTo: Address,
): TransferLog[] {
  const found: TransferLog[] = [];
  for (const log of receipt.logs as Log[]) {
    if (log.address.toLowerCase() !== usdc.toLowerCase()) continue;
    let decoded: ReturnType<typeof decodeEventLog<typeof usdcAbi>>;
    try {
      decoded = decodeEventLog({ abi: usdcAbi, data: log.data, topics: log.topics });
    } catch {
      continue;
    }
    if (decoded.eventName !== "Transfer") continue;
    const { from, to, value } = decoded.args as { from: Hex; to: Hex; value: bigint };
    if (to.toLowerCase() !== payTo.toLowerCase()) continue;
    found.push({
      txHash: receipt.transactionHash.toLowerCase(),
      logIndex: log.logIndex ?? -1,
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash.toLowerCase(),
      from: from.toLowerCase(),
      to: to.toLowerCase(),
      value,
    });
  }
  return found;
}

/** The receipt of a transaction, or null while it is unknown to the chain (not mined). */
export async function receiptOrNull(
  chain: PublicClient,
  hash: Hex,
): Promise<TransactionReceipt | null> {
  try {
    return await chain.getTransactionReceipt({ hash });
  } catch (error) {
    if ((error as Error).name === "TransactionReceiptNotFoundError") return null;
    throw error;
  }
}
