import {
  type Address,
  createPublicClient,
  encodeEventTopics,
  getAbiItem,
  type Hex,
  http,
  isHash,
  isHex,
  numberToHex,
  type PublicClient,
  pad,
} from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { chainDefinition } from "../chain/publicClient.ts";
import { type BroadcastOutcome, classifyBroadcastError } from "./broadcastError.ts";

/** Requests issued together go out as one JSON-RPC batch of at most this many. */
export const RPC_BATCH_SIZE = 100;

/**
 * The payout path's own client. Requests made in the same tick travel as JSON-RPC batches, so
 * hundreds of raw transactions or receipt lookups cost a handful of round trips.
 */
export function createPayoutRpc(rpcUrl: string, chainId: number): PublicClient {
  return createPublicClient({
    chain: chainDefinition(chainId, rpcUrl),
    // Never a cached block number or nonce: a stale one delays confirmation by seconds.
    cacheTime: 0,
    transport: http(rpcUrl, {
      batch: { batchSize: RPC_BATCH_SIZE, wait: 0 },
      timeout: 10_000,
      retryCount: 1,
    }),
  });
}

/**
 * Sends raw transactions in the order given (callers pass nonce order): one batch at a time, so
 * a later nonce never reaches the node in an earlier request than a lower one. When a whole
 * batch fails to reach the node, the rest are not sent (a later round retries them).
 */
export async function sendRawTransactions(
  rpc: PublicClient,
  rawTransactions: Hex[],
): Promise<BroadcastOutcome[]> {
  const outcomes: BroadcastOutcome[] = [];
  for (let start = 0; start < rawTransactions.length; start += RPC_BATCH_SIZE) {
    const batch = rawTransactions.slice(start, start + RPC_BATCH_SIZE);
    const settled = await Promise.allSettled(
      batch.map((serializedTransaction) => rpc.sendRawTransaction({ serializedTransaction })),
    );
    const batchOutcomes = settled.map(
      (result): BroadcastOutcome =>
        result.status === "fulfilled"
          ? { kind: "accepted" }
          : classifyBroadcastError(result.reason),
    );
    outcomes.push(...batchOutcomes);
    if (
      batchOutcomes.every(
        (outcome) => outcome.kind === "failed" && outcome.code === "rpc_unreachable",
      )
    ) {
      const rest = rawTransactions.length - outcomes.length;
      for (let index = 0; index < rest; index += 1) {
        outcomes.push({ kind: "failed", code: "not_sent", detail: "the RPC did not answer" });
      }
      break;
    }
  }
  return outcomes;
}

/** A mined transaction's outcome, or null when the node does not know it as mined. */
export interface MinedReceipt {
  status: "success" | "reverted";
  blockNumber: bigint;
  blockHash: Hex;
}

/**
 * Receipts for many hashes in a few batched requests. A hash whose lookup failed is absent
 * from the map (unknown); a hash the node does not know as mined maps to null.
 */
export async function readReceipts(
  rpc: PublicClient,
  hashes: Hex[],
): Promise<Map<Hex, MinedReceipt | null>> {
  const settled = await Promise.allSettled(
    hashes.map((hash) => rpc.request({ method: "eth_getTransactionReceipt", params: [hash] })),
  );
  const receipts = new Map<Hex, MinedReceipt | null>();
  settled.forEach((result, index) => {
    const hash = hashes[index] as Hex;
    if (result.status === "rejected") return;
    const receipt = result.value;
    receipts.set(
      hash,
      receipt
        ? {
            status: BigInt(receipt.status) === 1n ? "success" : "reverted",
            blockNumber: BigInt(receipt.blockNumber),
            blockHash: receipt.blockHash,
          }
        : null,
    );
  });
  return receipts;
}

/** Where a USDC transfer out of the payout wallet sits, as the chain's logs report it now. */
export interface WalletTransfer {
  blockNumber: bigint;
  blockHash: Hex;
}

const TRANSFER_EVENT = getAbiItem({ abi: usdcAbi, name: "Transfer" });

/** Recipients named in one `eth_getLogs` filter at most (providers cap a topic's alternatives). */
const MAX_RECIPIENTS_IN_FILTER = 1_000;

/** A log as `eth_getLogs` returns it: only what is compared or kept here. */
interface RawLog {
  address?: unknown;
  topics?: unknown;
  transactionHash?: unknown;
  blockNumber?: unknown;
  blockHash?: unknown;
  removed?: unknown;
}

/**
 * The wallet's USDC transfers to `recipients` from `fromBlock` to the head, by transaction hash
 * (lowercase), in one `eth_getLogs`. Only a successful transaction leaves a log, so a payout found
 * here was mined and succeeded, without a receipt: a node builds a receipt from its whole block
 * (Anvil in time that grows with the block), and a burst's blocks hold thousands. The recipients
 * narrow the answer to the candidates' transfers (a burst's block holds thousands of the wallet's
 * others). Each log is checked against the filter by its topics, as strings: viem's `getLogs` with
 * these args decoded every log and compared it with every recipient through `isAddressEqual`, 15%
 * of the service's CPU in a 10,000-payout burst (BENCHMARKS.md#payouts). Null when the
 * node would not answer, or answered what does not parse (a range or result cap, say): the caller
 * reads receipts as before.
 */
export async function readWalletTransfers(
  rpc: PublicClient,
  filter: { usdc: Address; wallet: Address; recipients: Address[]; fromBlock: bigint },
): Promise<Map<Hex, WalletTransfer> | null> {
  const recipients = [...new Set(filter.recipients.map((recipient) => recipient.toLowerCase()))];
  try {
    const topics = encodeEventTopics({
      abi: [TRANSFER_EVENT],
      args: {
        from: filter.wallet,
        ...(recipients.length <= MAX_RECIPIENTS_IN_FILTER ? { to: recipients as Address[] } : {}),
      },
    });
    const [eventTopic, walletTopic] = topics as [Hex, Hex];
    const wanted = new Set(recipients.map((recipient) => pad(recipient as Address).toLowerCase()));
    const logs = (await rpc.request({
      method: "eth_getLogs",
      params: [
        {
          address: filter.usdc,
          topics,
          fromBlock: numberToHex(filter.fromBlock < 0n ? 0n : filter.fromBlock),
          toBlock: "latest",
        },
      ],
    })) as unknown;
    if (!Array.isArray(logs)) return null;
    const transfers = new Map<Hex, WalletTransfer>();
    for (const log of logs as RawLog[]) {
      if (
        log.removed === true ||
        !isTransferOf(log, filter.usdc, eventTopic, walletTopic, wanted)
      ) {
        continue;
      }
      if (
        typeof log.transactionHash !== "string" ||
        !isHash(log.transactionHash) ||
        typeof log.blockHash !== "string" ||
        !isHash(log.blockHash) ||
        typeof log.blockNumber !== "string" ||
        !isHex(log.blockNumber, { strict: true })
      ) {
        return null;
      }
      transfers.set(log.transactionHash.toLowerCase() as Hex, {
        blockNumber: BigInt(log.blockNumber),
        blockHash: log.blockHash.toLowerCase() as Hex,
      });
    }
    return transfers;
  } catch {
    return null;
  }
}

/** The token's Transfer, from the wallet, to one of the wanted recipients: by its topics. */
function isTransferOf(
  log: RawLog,
  usdc: Address,
  eventTopic: Hex,
  walletTopic: Hex,
  wanted: Set<string>,
): boolean {
  const topics = log.topics;
  return (
    typeof log.address === "string" &&
    log.address.toLowerCase() === usdc.toLowerCase() &&
    Array.isArray(topics) &&
    topics.length === 3 &&
    typeof topics[0] === "string" &&
    topics[0].toLowerCase() === eventTopic &&
    typeof topics[1] === "string" &&
    topics[1].toLowerCase() === walletTopic &&
    typeof topics[2] === "string" &&
    wanted.has(topics[2].toLowerCase())
  );
}
