import { decodeAbiParameters, encodeEventTopics, type Hex, pad } from "viem";
import { usdcAbi } from "../contracts-abi/usdc.ts";

const [AUTHORIZATION_USED_TOPIC] = encodeEventTopics({
  abi: usdcAbi,
  eventName: "AuthorizationUsed",
});
const [TRANSFER_TOPIC] = encodeEventTopics({ abi: usdcAbi, eventName: "Transfer" });

// A direct call of the token's transfer/transferFrom cannot carry an EIP-3009 authorization:
// skip the receipt lookup for those (the common case for claim-flow payments).
const PLAIN_TRANSFER_SELECTORS = new Set(["0xa9059cbb", "0x23b872dd"]);

interface ReceiptLog {
  address: string;
  logIndex: number;
  topics: readonly Hex[];
  data: Hex;
}

interface ReceiptReader {
  getTransactionReceipt(args: {
    hash: Hex;
  }): Promise<{ blockHash: Hex; logs: readonly ReceiptLog[] }>;
}

export interface TransferInTransaction {
  token: Hex;
  txHash: Hex;
  txTo: Hex | null;
  txInput: Hex;
  logIndex: number;
  from: Hex;
  to: Hex;
  value: bigint;
  /** The block the event is in: a receipt from another block is a stale copy (a reorg). */
  blockHash: Hex;
}

/**
 * The EIP-3009 nonce behind a transfer, or null. USDC emits `AuthorizationUsed(authorizer,
 * nonce)` immediately before the `Transfer` it authorizes, so the log just before this
 * transfer, from the same token and the same authorizer, carries the nonce.
 * (Ponder's `event.transactionReceipt` has no logs; the receipt is read through the client.)
 */
export async function authorizationNonceOf(
  transfer: TransferInTransaction,
  client: ReceiptReader,
): Promise<Hex | null> {
  const calledTokenDirectly = transfer.txTo?.toLowerCase() === transfer.token.toLowerCase();
  if (calledTokenDirectly && PLAIN_TRANSFER_SELECTORS.has(transfer.txInput.slice(0, 10))) {
    return null;
  }
  const receipt = await client.getTransactionReceipt({ hash: transfer.txHash });
  const logs = receipt.logs;
  // Ponder caches receipts by hash: after a reorg that mined the transaction again elsewhere,
  // the copy it returns has the old block's log indexes. Then the pair is found by content:
  // the AuthorizationUsed right before a Transfer of this sender, recipient and value.
  const sameBlock = receipt.blockHash.toLowerCase() === transfer.blockHash.toLowerCase();
  const transferAt = sameBlock
    ? logs.findIndex((log) => log.logIndex === transfer.logIndex)
    : logs.findIndex((log) => isThisTransfer(log, transfer));
  const previous = transferAt > 0 ? logs[transferAt - 1] : undefined;
  if (
    previous &&
    previous.address.toLowerCase() === transfer.token.toLowerCase() &&
    previous.topics[0] === AUTHORIZATION_USED_TOPIC &&
    previous.topics[1]?.toLowerCase() === pad(transfer.from).toLowerCase() &&
    previous.topics[2]
  ) {
    return previous.topics[2].toLowerCase() as Hex;
  }
  return null;
}

function isThisTransfer(log: ReceiptLog, transfer: TransferInTransaction): boolean {
  if (log.address.toLowerCase() !== transfer.token.toLowerCase()) return false;
  if (log.topics[0] !== TRANSFER_TOPIC) return false;
  if (log.topics[1]?.toLowerCase() !== pad(transfer.from).toLowerCase()) return false;
  if (log.topics[2]?.toLowerCase() !== pad(transfer.to).toLowerCase()) return false;
  const [value] = decodeAbiParameters([{ type: "uint256" }], log.data);
  return value === transfer.value;
}
