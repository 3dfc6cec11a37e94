import { encodeEventTopics, type Hex, pad } from "viem";
import { usdcAbi } from "../contracts-abi/usdc.ts";

const [AUTHORIZATION_USED_TOPIC] = encodeEventTopics({
  abi: usdcAbi,
  eventName: "AuthorizationUsed",
});

// A direct call of the token's transfer/transferFrom cannot carry an EIP-3009 authorization:
// skip the receipt lookup for those (the common case for claim-flow payments).
const PLAIN_TRANSFER_SELECTORS = new Set(["0xa9059cbb", "0x23b872dd"]);

interface ReceiptReader {
  getTransactionReceipt(args: { hash: Hex }): Promise<{
    logs: readonly { address: string; logIndex: number; topics: readonly Hex[] }[];
  }>;
}

export interface TransferInTransaction {
  token: Hex;
  txHash: Hex;
  txTo: Hex | null;
  txInput: Hex;
  logIndex: number;
  from: Hex;
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
  const previous = receipt.logs.find((log) => log.logIndex === transfer.logIndex - 1);
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
