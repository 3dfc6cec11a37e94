import { createPublicClient, encodeFunctionData, type Hex, http, parseGwei } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { readIndexedBlock } from "../../api/chain/indexedBlock.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { accountWithRole, devnetAccounts } from "../devnet/accounts.ts";
import { type BenchInfrastructure, watchHeight } from "./benchStack.ts";

/**
 * A burst of variant A payments on the devnet, for the benchmarks that time the service's loops
 * on the chain (payouts.ts, scaleLoops.ts): claims created over the service's HTTP API, one
 * exact-amount payment signed for each by funded payers, sent in order, and mined.
 */

const USDC = 1_000_000n;

export interface BurstClaim {
  claimId: string;
  amountDue: bigint;
}

/** `count` claims over POST /api/claims, 20 at a time, each for a new payout address. */
export async function createClaims(serviceUrl: string, count: number): Promise<BurstClaim[]> {
  const createOne = async (): Promise<BurstClaim> => {
    const response = await fetch(`${serviceUrl}/api/claims`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payout_address: privateKeyToAccount(generatePrivateKey()).address }),
    });
    const body = (await response.json()) as { claim_id: string; amount_due_usdc: string };
    if (response.status !== 201) throw new Error(`claim creation failed: ${JSON.stringify(body)}`);
    return { claimId: body.claim_id, amountDue: BigInt(body.amount_due_usdc.replace(".", "")) };
  };
  const claims: BurstClaim[] = [];
  for (let start = 0; start < count; start += 20) {
    claims.push(
      ...(await Promise.all(Array.from({ length: Math.min(20, count - start) }, createOne))),
    );
  }
  return claims;
}

/**
 * Payers of PAYMENTS_PER_PAYER payments each, funded with ETH and USDC: thousands of pending
 * transactions from one sender slow Anvil's pool to a crawl, and a real burst comes from many
 * payers anyway.
 */
const PAYMENTS_PER_PAYER = 250;

/** Mints wait for their receipt: call while the chain mines (automine or interval). */
async function fundPayers(infrastructure: BenchInfrastructure, count: number) {
  const payers = Array.from({ length: Math.ceil(count / PAYMENTS_PER_PAYER) }, () =>
    privateKeyToAccount(generatePrivateKey()),
  );
  for (const payer of payers) {
    await infrastructure.client.setBalance({ address: payer.address, value: 10n ** 18n });
    await infrastructure.mint(payer.address, BigInt(PAYMENTS_PER_PAYER) * 11n * USDC);
  }
  return payers;
}

/**
 * Signs one exact-amount payment per claim, PAYMENTS_PER_PAYER per new payer, nonces
 * consecutive; the payers are funded first (their mints are mined, so the chain must be mining).
 */
export async function signPayments(
  infrastructure: BenchInfrastructure,
  claims: BurstClaim[],
): Promise<Hex[]> {
  const payers = await fundPayers(infrastructure, claims.length);
  return Promise.all(
    claims.map((claim, index) => {
      const account = payers[Math.floor(index / PAYMENTS_PER_PAYER)] as (typeof payers)[number];
      return account.signTransaction({
        chainId: 8453,
        type: "eip1559",
        nonce: index % PAYMENTS_PER_PAYER,
        to: BASE_USDC_ADDRESS,
        data: encodeFunctionData({
          abi: usdcAbi,
          functionName: "transfer",
          args: [infrastructure.payTo, claim.amountDue],
        }),
        gas: 60_000n,
        maxFeePerGas: parseGwei("5"),
        maxPriorityFeePerGas: parseGwei("0.01"),
      });
    }),
  );
}

/**
 * Sends signed payments 100 to a JSON-RPC batch, one batch after the other, so each payer's
 * nonces reach Anvil in order: 100 separate concurrent requests arrive shuffled, and Anvil's
 * pool takes out-of-order nonces so slowly on a busy machine (~10 a second seen here) that a
 * 10,000 run spent most of its time here. Only the setup is faster; nothing measured changes.
 */
export async function sendAll(rpcUrl: string, raw: Hex[]): Promise<void> {
  const batching = createPublicClient({
    transport: http(rpcUrl, { batch: { batchSize: 100, wait: 0 }, timeout: 300_000 }),
  });
  for (let start = 0; start < raw.length; start += 100) {
    await Promise.all(
      raw
        .slice(start, start + 100)
        .map((serializedTransaction) => batching.sendRawTransaction({ serializedTransaction })),
    );
  }
}

/**
 * Mines a block at a time while Anvil's pool holds pending transactions (the chain's automatic
 * mining off): the pool's transactions in as few blocks as their gas allows. Answers the blocks
 * mined, 0 when nothing was pending.
 */
export async function mineUntilPoolEmpty(infrastructure: BenchInfrastructure): Promise<number> {
  const pending = async () => {
    const status = await infrastructure.client.request({ method: "txpool_status" as never });
    return Number(BigInt((status as { pending: string }).pending));
  };
  let blocks = 0;
  while ((await pending()) > 0) {
    await infrastructure.client.mine({ blocks: 1 });
    blocks += 1;
  }
  return blocks;
}

/**
 * Mints the payout wallet what `payouts` more payouts need beyond its balance now: the devnet
 * gives it 10,000 USDC (scripts/devnet/prepareChain.ts), which a 10,000 burst empties.
 */
export async function topUpPayoutWallet(
  infrastructure: BenchInfrastructure,
  payouts: number,
): Promise<void> {
  const wallet = accountWithRole(devnetAccounts(), "payout").address;
  const balance = await infrastructure.client.readContract({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    functionName: "balanceOf",
    args: [wallet],
  });
  const needed = BigInt(payouts) * USDC;
  if (needed > balance) await infrastructure.mint(wallet, needed - balance);
}

/** When the indexer's checkpoint first reached each block, polled every 100 ms. */
export function watchIndexedBlocks(sql: unknown) {
  // A pool that returns int8 as text (the bench's own) or as bigint (the service's parser): the
  // service's reader is typed for the latter.
  return watchHeight(
    () =>
      readIndexedBlock(sql as never, 8453).then((block) => (block === null ? null : BigInt(block))),
    100,
  );
}
