import {
  type Address,
  createPublicClient,
  encodeEventTopics,
  getAddress,
  type Hex,
  http,
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

/** A USDC transfer out of the payout wallet, as a log of the chain's blocks reports it now. */
export interface WalletTransfer {
  to: Address;
  value: bigint;
  blockNumber: bigint;
  blockHash: Hex;
}

const TRANSFER_TOPIC = encodeEventTopics({ abi: usdcAbi, eventName: "Transfer" })[0].toLowerCase();

interface RpcLog {
  address: Hex;
  transactionHash: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  data: Hex;
  topics: Hex[];
  removed?: boolean;
}

/**
 * The wallet's USDC transfers from `fromBlock` to the head, by transaction hash, in one
 * `eth_getLogs`. Only a successful transaction leaves a log, so a payout found here was mined
 * and succeeded, without a receipt: a node builds a receipt from its whole block (Anvil in time
 * that grows with the block), and a burst's blocks hold thousands. Null when the node would not
 * answer (a range or result cap, say): the caller reads receipts as before.
 */
export async function readWalletTransfers(
  rpc: PublicClient,
  usdc: Address,
  wallet: Address,
  fromBlock: bigint,
): Promise<Map<Hex, WalletTransfer> | null> {
  let logs: RpcLog[];
  try {
    logs = (await rpc.request({
      method: "eth_getLogs",
      params: [
        {
          address: usdc,
          topics: [TRANSFER_TOPIC as Hex, pad(wallet)],
          fromBlock: numberToHex(fromBlock < 0n ? 0n : fromBlock),
          toBlock: "latest",
        },
      ],
    })) as RpcLog[];
  } catch {
    return null;
  }
  const transfers = new Map<Hex, WalletTransfer>();
  const walletTopic = pad(wallet).toLowerCase();
  for (const log of logs) {
    // The node filtered by these; checked again because a log is only as good as its fields.
    const [topic, fromTopic, toTopic] = log.topics.map((topic) => topic.toLowerCase());
    if (log.removed || log.address.toLowerCase() !== usdc.toLowerCase()) continue;
    if (topic !== TRANSFER_TOPIC || fromTopic !== walletTopic || !toTopic) continue;
    if (log.topics.length !== 3 || !/^0x[0-9a-fA-F]{64}$/.test(log.data)) continue;
    transfers.set(log.transactionHash.toLowerCase() as Hex, {
      to: getAddress(`0x${toTopic.slice(26)}`),
      value: BigInt(log.data),
      blockNumber: BigInt(log.blockNumber),
      blockHash: log.blockHash.toLowerCase() as Hex,
    });
  }
  return transfers;
}

/**
 * The canonical block hash at each height, lowercase (absent where the node did not answer or
 * has no such block): a payout stored as mined at (height, hash) is still there, with the same
 * outcome, exactly while the chain's block at that height has that hash.
 */
export async function readBlockHashes(
  rpc: PublicClient,
  heights: bigint[],
): Promise<Map<bigint, Hex>> {
  const settled = await Promise.allSettled(
    heights.map((height) =>
      rpc.request({ method: "eth_getBlockByNumber", params: [numberToHex(height), false] }),
    ),
  );
  const hashes = new Map<bigint, Hex>();
  settled.forEach((result, index) => {
    const height = heights[index];
    if (height === undefined || result.status === "rejected" || !result.value?.hash) return;
    hashes.set(height, result.value.hash.toLowerCase() as Hex);
  });
  return hashes;
}
