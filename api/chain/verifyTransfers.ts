import type { Address, Hex, PublicClient, TransactionReceipt } from "viem";
import type { IncomingTransfer } from "./incomingTransfers.ts";
import { receiptOrNull, transfersToPayTo } from "./transferLogs.ts";

/**
 * The last look before a payment can lead to a payout: is the transfer still on the canonical
 * chain, in a successful transaction, in the block the indexer saw, with the same facts?
 * Receipts are read per block (`eth_getBlockReceipts`: one call for many payments), or per
 * transaction where the RPC lacks that method.
 * Returns how many of `transfers` (a prefix, in order) passed.
 */
export async function verifiedPrefix(
  chain: PublicClient,
  usdc: Address,
  payTo: Address,
  transfers: IncomingTransfer[],
): Promise<number> {
  const receipts = new ReceiptCache(chain);
  for (const [index, transfer] of transfers.entries()) {
    const receipt = await receipts.get(transfer);
    if (!receipt || !sameTransfer(receipt, transfer, usdc, payTo)) return index;
  }
  return transfers.length;
}

function sameTransfer(
  receipt: TransactionReceipt,
  transfer: IncomingTransfer,
  usdc: Address,
  payTo: Address,
): boolean {
  if (receipt.status !== "success") return false;
  if (receipt.blockHash.toLowerCase() !== transfer.blockHash) return false;
  const log = transfersToPayTo(receipt, usdc, payTo).find(
    (candidate) => candidate.logIndex === transfer.logIndex,
  );
  return log !== undefined && log.from === transfer.from && log.value === transfer.value;
}

let blockReceiptsUnsupported = false;

class ReceiptCache {
  private readonly chain: PublicClient;
  private readonly blocks = new Map<bigint, Map<string, TransactionReceipt>>();

  constructor(chain: PublicClient) {
    this.chain = chain;
  }

  async get(transfer: IncomingTransfer): Promise<TransactionReceipt | null> {
    if (!blockReceiptsUnsupported) {
      let block: Map<string, TransactionReceipt> | null | undefined = this.blocks.get(
        transfer.blockNumber,
      );
      if (!block) {
        block = await this.readBlock(transfer.blockNumber);
        if (block) this.blocks.set(transfer.blockNumber, block);
      }
      if (block) return block.get(transfer.txHash) ?? null;
    }
    return receiptOrNull(this.chain, transfer.txHash as Hex);
  }

  private async readBlock(blockNumber: bigint): Promise<Map<string, TransactionReceipt> | null> {
    try {
      const receipts = await this.chain.getBlockReceipts({ blockNumber });
      return new Map(receipts.map((receipt) => [receipt.transactionHash.toLowerCase(), receipt]));
    } catch (error) {
      // An RPC without the method: use per-transaction receipts from now on.
      if (/method .*(not found|not supported|does not exist)|unsupported/i.test(String(error))) {
        blockReceiptsUnsupported = true;
        return null;
      }
      throw error;
    }
  }
}
