import {
  type Address,
  decodeEventLog,
  encodeEventTopics,
  type Hex,
  type Log,
  type PublicClient,
  pad,
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
  /** The n-th transfer of this receipt with this sender and value (see IncomingTransfer). */
  transferOrdinal: number;
  /**
   * The EIP-3009 nonce when the transfer came from `transferWithAuthorization`: USDC emits
   * AuthorizationUsed(from, nonce) right before the Transfer.
   */
  authorizationNonce: string | null;
}

const [AUTHORIZATION_USED] = encodeEventTopics({ abi: usdcAbi, eventName: "AuthorizationUsed" });

/** The USDC transfers to `payTo` in a receipt (lowercase addresses and hashes). */
export function transfersToPayTo(
  receipt: Pick<TransactionReceipt, "logs" | "transactionHash" | "blockNumber" | "blockHash">,
  usdc: Address,
  payTo: Address,
): TransferLog[] {
  const found: TransferLog[] = [];
  const seen = new Map<string, number>();
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
    const previous = (receipt.logs as Log[]).find(
      (candidate) => candidate.logIndex === (log.logIndex ?? -1) - 1,
    );
    const authorizationNonce =
      previous?.address.toLowerCase() === usdc.toLowerCase() &&
      previous.topics[0] === AUTHORIZATION_USED &&
      previous.topics[1]?.toLowerCase() === pad(from).toLowerCase()
        ? (previous.topics[2]?.toLowerCase() ?? null)
        : null;
    const sameKey = `${from.toLowerCase()}:${value}`;
    const transferOrdinal = (seen.get(sameKey) ?? 0) + 1;
    seen.set(sameKey, transferOrdinal);
    found.push({
      txHash: receipt.transactionHash.toLowerCase(),
      logIndex: log.logIndex ?? -1,
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash.toLowerCase(),
      from: from.toLowerCase(),
      to: to.toLowerCase(),
      value,
      transferOrdinal,
      authorizationNonce,
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

/**
 * The receipt, asked again every `pollMs` for up to `waitMs` while the chain does not know the
 * transaction: our node may trail the one a client or facilitator saw it mined on, or a reorg
 * may have just taken it out of its block. Null if it is still unknown then.
 */
export async function receiptWithin(
  chain: PublicClient,
  hash: Hex,
  options: { waitMs: number; pollMs: number },
): Promise<TransactionReceipt | null> {
  const deadline = Date.now() + options.waitMs;
  let receipt = await receiptOrNull(chain, hash);
  while (!receipt && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, options.pollMs));
    receipt = await receiptOrNull(chain, hash);
  }
  return receipt;
}
