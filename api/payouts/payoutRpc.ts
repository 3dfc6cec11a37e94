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
 * One log as a transfer of a wanted transaction, or null. The node filtered by address and
 * topics; they are checked again, and any field missing or malformed skips the log (its
 * payout then goes to its receipt), because a log is only as good as its fields.
 */
function walletTransferOf(
  log: RpcLog,
  usdc: Address,
  walletTopic: string,
  wanted: Set<Hex>,
): (WalletTransfer & { txHash: Hex }) | null {
  const txHash = typeof log?.transactionHash === "string" ? log.transactionHash.toLowerCase() : "";
  if (!wanted.has(txHash as Hex) || log.removed) return null;
  if (typeof log.address !== "string" || log.address.toLowerCase() !== usdc.toLowerCase()) {
    return null;
  }
  if (!Array.isArray(log.topics) || log.topics.length !== 3) return null;
  const [topic, fromTopic, toTopic] = log.topics.map((part) => String(part).toLowerCase());
  if (topic !== TRANSFER_TOPIC || fromTopic !== walletTopic) return null;
  if (!toTopic || !/^0x0{24}[0-9a-f]{40}$/.test(toTopic)) return null;
  if (typeof log.data !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(log.data)) return null;
  if (typeof log.blockHash !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(log.blockHash)) return null;
  if (typeof log.blockNumber !== "string" || !/^0x[0-9a-fA-F]+$/.test(log.blockNumber)) return null;
  return {
    txHash: txHash as Hex,
    to: getAddress(`0x${toTopic.slice(26)}`),
    value: BigInt(log.data),
    blockNumber: BigInt(log.blockNumber),
    blockHash: log.blockHash.toLowerCase() as Hex,
  };
}

/** Recipients named in one `eth_getLogs` filter at most (providers cap a topic's alternatives). */
const MAX_RECIPIENTS_IN_FILTER = 1_000;

/**
 * The wallet's USDC transfers to `recipients` from `fromBlock` to the head, by transaction hash,
 * in one `eth_getLogs`, kept only for the transactions in `wanted`. Only a successful
 * transaction leaves a log, so a payout found here was mined and succeeded, without a receipt:
 * a node builds a receipt from its whole block (Anvil in time that grows with the block), and a
 * burst's blocks hold thousands. The recipients narrow the answer to the candidates' transfers
 * (a burst's block holds thousands of the wallet's others). Null when the node would not answer
 * (a range or result cap, say): the caller reads receipts as before.
 */
export async function readWalletTransfers(
  rpc: PublicClient,
  filter: { usdc: Address; wallet: Address; recipients: Address[]; fromBlock: bigint },
  wanted: Set<Hex>,
): Promise<Map<Hex, WalletTransfer> | null> {
  const { usdc, wallet, fromBlock } = filter;
  const recipients = [...new Set(filter.recipients.map((to) => pad(to).toLowerCase() as Hex))];
  let logs: RpcLog[];
  try {
    logs = (await rpc.request({
      method: "eth_getLogs",
      params: [
        {
          address: usdc,
          topics: [
            TRANSFER_TOPIC as Hex,
            pad(wallet),
            ...(recipients.length <= MAX_RECIPIENTS_IN_FILTER ? [recipients] : []),
          ],
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
  for (const log of Array.isArray(logs) ? logs : []) {
    const transfer = walletTransferOf(log, usdc, walletTopic, wanted);
    if (transfer) transfers.set(transfer.txHash, transfer);
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
