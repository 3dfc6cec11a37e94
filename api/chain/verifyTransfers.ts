import {
  type Address,
  getAbiItem,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import type { Logger } from "../logger.ts";
import type { IncomingTransfer } from "./incomingTransfers.ts";
import { receiptOrNull, transfersToPayTo } from "./transferLogs.ts";

/** Blocks whose transfers are kept between batches: a burst spans a few, a quiet day one. */
const KEPT_BLOCKS = 32;
/** Per-transaction receipts asked at once when a block's logs do not come. */
const RECEIPTS_IN_PARALLEL = 16;
/** After a block's logs failed, its batches read receipts for this long before logs again. */
const LOGS_RETRY_AFTER_MS = 30_000;
const TRANSFER_EVENT = getAbiItem({ abi: usdcAbi, name: "Transfer" });

/** What the re-check compares of one transfer to `payTo`. */
interface TransferOnChain {
  blockHash: string;
  from: string;
  value: bigint;
}

/** The transfers to `payTo` the chain has in one block, keyed "tx:logIndex". */
interface BlockTransfers {
  blockHash: string;
  byLog: Map<string, TransferOnChain>;
  /** Read from the block's logs (not from receipts): an answer a provider can cut short. */
  fromLogs: boolean;
}

/**
 * The last look before a payment can lead to a payout: is the transfer still on the canonical
 * chain, in a successful transaction, in the block the indexer saw, with the same facts?
 *
 * One verifier lives as long as the matcher, because one block's payments can fill many
 * batches. A block's USDC transfers to `payTo` are read once, with `eth_getLogs` over that one
 * height beside the block's header (only a successful transaction has logs; each log names its
 * block's hash, and only logs of the block the header names count), and kept by block hash:
 * every later batch in that block only asks the header again (the logs under one hash never
 * change; another hash means a reorg, and the block is read afresh). A kept answer that fails
 * a transfer is dropped, so an incomplete reply is never trusted twice. Logs, not receipts:
 * under a burst's load, receipts of a block of thousands of payments (megabytes) took longer
 * than the RPC timeout on the devnet, again and again, where its logs to `payTo` are a
 * fraction. When the logs do not come, the batch's own transactions' receipts are asked one by
 * one instead, and that partial answer is not kept.
 */
export class TransferVerifier {
  private readonly chain: PublicClient;
  private readonly usdc: Address;
  private readonly payTo: Address;
  private readonly logger: Logger | undefined;
  private readonly kept = new Map<bigint, BlockTransfers>();
  private readonly logsFailedAt = new Map<bigint, number>();
  private readonly readAheadFailedAt = new Map<bigint, number>();
  /** For a verifier of one look: receipts of its own transactions, never a whole block. */
  private readonly oneByOne: boolean;
  /** Transfers that a block's logs lacked and its receipts had, since last taken. */
  private shortAnswers = 0;

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
      let onChain = await this.transfersIn(block.blockNumber, block.transfers);
      for (const transfer of block.transfers) {
        if (this.passes(onChain, transfer)) {
          passed += 1;
          continue;
        }
        // Never trust a kept answer that failed a check: an incomplete one (a lagging or cut
        // short reply) would otherwise fail this transfer, and stop the matcher, for good.
        this.kept.delete(block.blockNumber);
        if (!onChain.fromLogs || onChain.blockHash !== transfer.blockHash.toLowerCase()) {
          return passed;
        }
        // The block is the one indexed, yet its logs lack this transfer: a provider can cut
        // eth_getLogs short without an error. Its receipts decide (docs/operating.md#short-logs).
        onChain = await this.readOneByOne(block.transfers);
        if (!this.passes(onChain, transfer)) return passed;
        this.shortAnswers += 1;
        this.logger?.warn(
          { block: String(block.blockNumber), tx: transfer.txHash, logIndex: transfer.logIndex },
          "eth_getLogs answered without a transfer the block's receipts have: the RPC cut its answer short; reading receipts",
        );
        passed += 1;
      }
    }
    return passed;
  }

  /** How many transfers the logs came back short of since the last call (for health). */
  takeShortAnswers(): number {
    const count = this.shortAnswers;
    this.shortAnswers = 0;
    return count;
  }

  private passes(onChain: BlockTransfers, transfer: IncomingTransfer): boolean {
    const log = onChain.byLog.get(logKey(transfer.txHash, transfer.logIndex));
    return log !== undefined && sameTransfer(log, transfer);
  }

  private async transfersIn(
    blockNumber: bigint,
    wanted: IncomingTransfer[],
  ): Promise<BlockTransfers> {
    if (this.oneByOne || failedLately(this.logsFailedAt, blockNumber)) {
      return this.readOneByOne(wanted);
    }
    // The header says which block is canonical at this height now; a kept or a fresh answer
    // counts only for that block (a load-balanced RPC can answer the two from different nodes).
    const header = this.chain.getBlock({ blockNumber });
    const kept = this.kept.get(blockNumber);
    if (kept) {
      if ((await header).hash?.toLowerCase() === kept.blockHash) return kept;
      this.kept.delete(blockNumber);
    }
    try {
      return await this.readAndKeep(blockNumber, header);
    } catch (error) {
      this.logsFailedAt.set(blockNumber, Date.now());
      this.logger?.warn(
        { block: String(blockNumber), err: error },
        "a block's transfers did not come; reading this batch's receipts one by one",
      );
      return this.readOneByOne(wanted);
    }
  }

  /**
   * Reads and keeps a block's transfers before the block is confirmed, while the matcher has
   * nothing confirmed to match: a burst's block of thousands is then read before its confirmation
   * block arrives, and its first batch asks only the header (reading its logs took ~0.9 s of the
   * first batch in a 10,000-payment block, BENCHMARKS.md#payouts). It decides nothing:
   * every batch still compares what is kept with the block the chain has at that height then, and a
   * read that fails here leaves the block to be read at confirmation as before, and is not tried
   * again for LOGS_RETRY_AFTER_MS. False when the block was not read.
   */
  async readAhead(blockNumber: bigint): Promise<boolean> {
    if (this.oneByOne || this.kept.has(blockNumber)) return true;
    if (failedLately(this.readAheadFailedAt, blockNumber)) return false;
    try {
      await this.readAndKeep(blockNumber, this.chain.getBlock({ blockNumber }));
      this.readAheadFailedAt.delete(blockNumber);
      return true;
    } catch (error) {
      // Not again for a while: each try can cost the RPC's timeout, on every idle tick.
      this.readAheadFailedAt.set(blockNumber, Date.now());
      this.logger?.warn(
        { block: String(blockNumber), err: error },
        "a block's transfers could not be read ahead; they are read at its confirmation",
      );
      return false;
    }
  }

  /** The block's transfers to `payTo`, read beside the header that says which block it is. */
  private async readAndKeep(
    blockNumber: bigint,
    header: ReturnType<PublicClient["getBlock"]>,
  ): Promise<BlockTransfers> {
    const [logs, { hash }] = await Promise.all([
      this.chain.getLogs({
        address: this.usdc,
        event: TRANSFER_EVENT,
        args: { to: this.payTo },
        fromBlock: blockNumber,
        toBlock: blockNumber,
      }),
      header,
    ]);
    return this.keep(blockNumber, hash?.toLowerCase() ?? null, logs);
  }

  /**
   * The block's transfers to `payTo` from its logs, only those in the canonical block; kept
   * when every log was in it (logs under one hash never change).
   */
  private keep(
    blockNumber: bigint,
    canonicalHash: string | null,
    logs: {
      blockHash: Hex | null;
      transactionHash: Hex | null;
      logIndex: number | null;
      args: { from?: Address; to?: Address; value?: bigint };
    }[],
  ): BlockTransfers {
    const read: BlockTransfers = {
      blockHash: canonicalHash ?? "",
      byLog: new Map(),
      fromLogs: true,
    };
    let complete = canonicalHash !== null && logs.length > 0;
    for (const log of logs) {
      const { from, to, value } = log.args;
      if (!log.transactionHash || log.logIndex === null) continue;
      if (!from || value === undefined || to?.toLowerCase() !== this.payTo.toLowerCase()) continue;
      if (log.blockHash?.toLowerCase() !== canonicalHash) {
        complete = false;
        continue;
      }
      read.byLog.set(logKey(log.transactionHash, log.logIndex), {
        blockHash: canonicalHash as string,
        from: from.toLowerCase(),
        value,
      });
    }
    if (!complete) return read;
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
    const byLog = new Map<string, TransferOnChain>();
    for (const receipt of receipts) {
      if (receipt.status !== "success") continue;
      for (const log of transfersToPayTo(receipt, this.usdc, this.payTo)) {
        byLog.set(logKey(log.txHash, log.logIndex), log);
      }
    }
    return { blockHash: "", byLog, fromLogs: false };
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

/**
 * Whether reading `blockNumber` failed within LOGS_RETRY_AFTER_MS (each try can cost the RPC's
 * timeout); older failures are forgotten.
 */
function failedLately(failures: Map<bigint, number>, blockNumber: bigint): boolean {
  const now = Date.now();
  for (const [block, at] of failures) {
    if (now - at > LOGS_RETRY_AFTER_MS) failures.delete(block);
  }
  return failures.has(blockNumber);
}

function logKey(txHash: string, logIndex: number): string {
  return `${txHash.toLowerCase()}:${logIndex}`;
}

function sameTransfer(log: TransferOnChain, transfer: IncomingTransfer): boolean {
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
