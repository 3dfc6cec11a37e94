import type { Address, Hex, PublicClient, TransactionReceipt } from "viem";
import type { Logger } from "../logger.ts";
import type { IncomingTransfer } from "./incomingTransfers.ts";
import { receiptOrNull, type TransferLog, transfersToPayTo } from "./transferLogs.ts";

/** Blocks whose transfers are kept between batches: a burst spans a few, a quiet day one. */
const KEPT_BLOCKS = 32;
/** Per-transaction receipts asked at once when a block's receipts do not come. */
const RECEIPTS_IN_PARALLEL = 16;

/** The transfers to `payTo` the chain has in one block, keyed "tx:logIndex". */
interface BlockTransfers {
  blockHash: string;
  byLog: Map<string, TransferLog>;
}

/**
 * The last look before a payment can lead to a payout: is the transfer still on the canonical
 * chain, in a successful transaction, in the block the indexer saw, with the same facts?
 *
 * One verifier lives as long as the matcher, because one block's payments can fill many
 * batches: a block's receipts are read once (`eth_getBlockReceipts`), its transfers to `payTo`
 * kept by block hash, and every later batch in that block only asks the block's header again
 * (receipts under one hash never change; a header with another hash means a reorg, and the
 * block is read afresh). When the block's receipts do not come (a timeout: a block of thousands
 * of payments is megabytes), the batch's own transactions are asked one by one instead, and
 * that partial answer is not kept. An RPC without the method gets per-transaction receipts
 * from then on.
 */
export class TransferVerifier {
  private readonly chain: PublicClient;
  private readonly usdc: Address;
  private readonly payTo: Address;
  private readonly logger: Logger | undefined;
  private readonly kept = new Map<bigint, BlockTransfers>();
  /** Set when the RPC lacks `eth_getBlockReceipts`, or for a verifier of one look. */
  private oneByOne: boolean;

  constructor(
    chain: PublicClient,
    usdc: Address,
    payTo: Address,
    options: { logger?: Logger; wholeBlocks?: boolean } = {},
  ) {
    this.chain = chain;
    this.usdc = usdc;
    this.payTo = payTo;
    this.logger = options.logger;
    this.oneByOne = options.wholeBlocks === false;
  }

  /** How many of `transfers` (a prefix, in order) passed. */
  async verifiedPrefix(transfers: IncomingTransfer[]): Promise<number> {
    let passed = 0;
    for (const block of consecutiveBlocks(transfers)) {
      const onChain = await this.transfersIn(block.blockNumber, block.transfers);
      for (const transfer of block.transfers) {
        const log = onChain.byLog.get(logKey(transfer.txHash, transfer.logIndex));
        if (!log || !sameTransfer(log, transfer)) return passed;
        passed += 1;
      }
    }
    return passed;
  }

  private async transfersIn(
    blockNumber: bigint,
    wanted: IncomingTransfer[],
  ): Promise<BlockTransfers> {
    const kept = this.kept.get(blockNumber);
    if (kept) {
      const header = await this.chain.getBlock({ blockNumber });
      if (header.hash?.toLowerCase() === kept.blockHash) return kept;
      this.kept.delete(blockNumber);
    }
    if (!this.oneByOne) {
      try {
        const receipts = await this.chain.getBlockReceipts({ blockNumber });
        return this.keep(blockNumber, receipts);
      } catch (error) {
        if (/method .*(not found|not supported|does not exist)|unsupported/i.test(String(error))) {
          this.oneByOne = true;
        } else {
          this.logger?.warn(
            { block: String(blockNumber), err: error },
            "block receipts did not come; reading this batch's receipts one by one",
          );
        }
      }
    }
    return this.readOneByOne(wanted);
  }

  private keep(blockNumber: bigint, receipts: TransactionReceipt[]): BlockTransfers {
    const read = this.collect(receipts);
    const hashes = new Set(receipts.map((receipt) => receipt.blockHash.toLowerCase()));
    // A block with no receipts, or answered across a reorg, is used once and not kept.
    if (hashes.size !== 1) return read;
    read.blockHash = [...hashes][0] as string;
    this.kept.set(blockNumber, read);
    for (const oldest of this.kept.keys()) {
      if (this.kept.size <= KEPT_BLOCKS) break;
      this.kept.delete(oldest);
    }
    return read;
  }

  private async readOneByOne(wanted: IncomingTransfer[]): Promise<BlockTransfers> {
    const hashes = [...new Set(wanted.map((transfer) => transfer.txHash))];
    const receipts: TransactionReceipt[] = [];
    for (let start = 0; start < hashes.length; start += RECEIPTS_IN_PARALLEL) {
      const chunk = hashes.slice(start, start + RECEIPTS_IN_PARALLEL);
      const read = await Promise.all(chunk.map((hash) => receiptOrNull(this.chain, hash as Hex)));
      for (const receipt of read) if (receipt) receipts.push(receipt);
    }
    return this.collect(receipts);
  }

  /** Only successful transactions' transfers to `payTo`: all a later check can ask about. */
  private collect(receipts: TransactionReceipt[]): BlockTransfers {
    const byLog = new Map<string, TransferLog>();
    for (const receipt of receipts) {
      if (receipt.status !== "success") continue;
      for (const log of transfersToPayTo(receipt, this.usdc, this.payTo)) {
        byLog.set(logKey(log.txHash, log.logIndex), log);
      }
    }
    return { blockHash: "", byLog };
  }
}

/**
 * One look, for a caller with a transfer or two (an x402 settlement, a claim's evidence): their
 * own receipts, not their blocks' (a block of a burst is thousands of receipts).
 */
export function verifiedPrefix(
  chain: PublicClient,
  usdc: Address,
  payTo: Address,
  transfers: IncomingTransfer[],
): Promise<number> {
  return new TransferVerifier(chain, usdc, payTo, { wholeBlocks: false }).verifiedPrefix(transfers);
}

function logKey(txHash: string, logIndex: number): string {
  return `${txHash.toLowerCase()}:${logIndex}`;
}

function sameTransfer(log: TransferLog, transfer: IncomingTransfer): boolean {
  return (
    log.blockHash === transfer.blockHash.toLowerCase() &&
    log.from === transfer.from.toLowerCase() &&
    log.value === transfer.value
  );
}

/** Runs of transfers in the same block, in the batch's order. */
function consecutiveBlocks(
  transfers: IncomingTransfer[],
): { blockNumber: bigint; transfers: IncomingTransfer[] }[] {
  const runs: { blockNumber: bigint; transfers: IncomingTransfer[] }[] = [];
  for (const transfer of transfers) {
    const last = runs.at(-1);
    if (last && last.blockNumber === transfer.blockNumber) last.transfers.push(transfer);
    else runs.push({ blockNumber: transfer.blockNumber, transfers: [transfer] });
  }
  return runs;
}
