import { encodeFunctionData, type Hex, parseGwei } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { type BenchStack, percentile, startBenchStack, watchBlockArrivals } from "./benchStack.ts";

/**
 * `npm run bench:payouts` (method and results: BENCHMARKS.md).
 *  1. Burst: 1,000 claims paid in one block → blocks and seconds from the block that gives the
 *     payments their confirmations until every claim is `completed`.
 *  2. Latency: 100 single payments spread over 2 s blocks → per claim, time from the arrival of
 *     its confirmation block to `completed`, against the floor set by the chain itself (the
 *     wait for the next block, the earliest a payout can be mined), measured in the same run.
 */

const BLOCK_TIME_SECONDS = 2;
const CONFIRMATIONS = 3;
const BURST = Number(process.env.BENCH_BURST ?? 1000);
const SINGLES = Number(process.env.BENCH_SINGLES ?? 100);
const USDC = 1_000_000n;

interface Claim {
  claimId: string;
  amountDue: bigint;
}

async function createClaims(stack: BenchStack, count: number): Promise<Claim[]> {
  const claims: Claim[] = [];
  for (let index = 0; index < count; index++) {
    const response = await fetch(`${stack.service.url}/api/claims`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payout_address: privateKeyToAccount(generatePrivateKey()).address }),
    });
    const body = (await response.json()) as { claim_id: string; amount_due_usdc: string };
    if (response.status !== 201) throw new Error(`claim creation failed: ${JSON.stringify(body)}`);
    claims.push({
      claimId: body.claim_id,
      amountDue: BigInt(body.amount_due_usdc.replace(".", "")),
    });
  }
  return claims;
}

/** Signs one exact-amount payment per claim from the bench payer, with consecutive nonces. */
async function signPayments(stack: BenchStack, claims: Claim[]): Promise<Hex[]> {
  const account = privateKeyToAccount(stack.payer.privateKey);
  let nonce = await stack.client.getTransactionCount({
    address: account.address,
    blockTag: "pending",
  });
  return Promise.all(
    claims.map((claim) =>
      account.signTransaction({
        chainId: 8453,
        type: "eip1559",
        nonce: nonce++,
        to: BASE_USDC_ADDRESS,
        data: encodeFunctionData({
          abi: usdcAbi,
          functionName: "transfer",
          args: [stack.payTo, claim.amountDue],
        }),
        gas: 80_000n,
        maxFeePerGas: parseGwei("5"),
        maxPriorityFeePerGas: parseGwei("0.01"),
      }),
    ),
  );
}

async function sendAll(stack: BenchStack, raw: Hex[]): Promise<void> {
  for (let start = 0; start < raw.length; start += 100) {
    await Promise.all(
      raw
        .slice(start, start + 100)
        .map((serializedTransaction) => stack.client.sendRawTransaction({ serializedTransaction })),
    );
  }
}

async function untilCompleted(stack: BenchStack, claims: Claim[], timeoutMs: number) {
  const ids = claims.map((claim) => claim.claimId);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const [row] = await stack.service.sql<{ done: number }[]>`
      select count(*)::int as done from app.claims where id = any(${ids}) and status = 'completed'`;
    if (row?.done === ids.length) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return stack.service.sql<
    {
      id: string;
      completed_ms: number | null;
      payment_block: bigint;
      payout_block: bigint | null;
    }[]
  >`
    select c.id, (extract(epoch from c.completed_at) * 1000)::float8 as completed_ms,
      p.block_number as payment_block, po.block_number as payout_block
    from app.claims c
    join app.payments p on p.claim_id = c.id
    left join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    where c.id = any(${ids})`;
}

async function burst(stack: BenchStack) {
  const claims = await createClaims(stack, BURST);
  const raw = await signPayments(stack, claims);
  const arrivals = watchBlockArrivals(stack);
  // Hold the chain still while the payments enter the pool, then put them all in one block.
  await stack.client.request({ method: "evm_setIntervalMining" as never, params: [0] as never });
  await sendAll(stack, raw);
  await stack.client.mine({ blocks: 1 });
  const paymentBlock = await stack.client.getBlockNumber({ cacheTime: 0 });
  const inBlock = (await stack.client.getBlock({ blockNumber: paymentBlock })).transactions.length;
  await stack.client.request({
    method: "evm_setIntervalMining" as never,
    params: [BLOCK_TIME_SECONDS] as never,
  });

  const rows = await untilCompleted(stack, claims, 180_000);
  await arrivals.stop();
  const confirmationBlock = paymentBlock + BigInt(CONFIRMATIONS);
  const completed = rows.filter((row) => row.completed_ms !== null);
  const lastPayoutBlock = completed.reduce(
    (last, row) => ((row.payout_block ?? 0n) > last ? (row.payout_block ?? 0n) : last),
    0n,
  );
  const lastCompleted = Math.max(...completed.map((row) => row.completed_ms as number));
  const confirmedAt = arrivals.seenAt.get(confirmationBlock) ?? Number.NaN;
  return {
    payments: claims.length,
    paymentsInOneBlock: inBlock,
    completed: completed.length,
    blocksAfterConfirmation: Number(lastPayoutBlock - confirmationBlock),
    secondsAfterConfirmation: (lastCompleted - confirmedAt) / 1000,
  };
}

async function singles(stack: BenchStack) {
  const claims = await createClaims(stack, SINGLES);
  const raw = await signPayments(stack, claims);
  const arrivals = watchBlockArrivals(stack);
  for (const serializedTransaction of raw) {
    await stack.client.sendRawTransaction({ serializedTransaction });
    // Spread the payments over many blocks and over the whole block interval.
    await new Promise((resolve) => setTimeout(resolve, 150 + Math.random() * 500));
  }
  const rows = await untilCompleted(stack, claims, 120_000);
  // One more block, so the floor of the last confirmation block is known too.
  const lastBlock = await stack.client.getBlockNumber({ cacheTime: 0 });
  while ((await stack.client.getBlockNumber({ cacheTime: 0 })) <= lastBlock) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  await arrivals.stop();

  const latencies: number[] = [];
  const floors: number[] = [];
  for (const row of rows) {
    const confirmationBlock = row.payment_block + BigInt(CONFIRMATIONS);
    const confirmedAt = arrivals.seenAt.get(confirmationBlock);
    const nextBlockAt = arrivals.seenAt.get(confirmationBlock + 1n);
    if (row.completed_ms === null || confirmedAt === undefined || nextBlockAt === undefined)
      continue;
    latencies.push((row.completed_ms - confirmedAt) / 1000);
    floors.push((nextBlockAt - confirmedAt) / 1000);
  }
  return {
    payments: claims.length,
    measured: latencies.length,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    max: Math.max(...latencies),
    floorP50: percentile(floors, 50),
    floorP95: percentile(floors, 95),
  };
}

const stack = await startBenchStack({
  blockTimeSeconds: BLOCK_TIME_SECONDS,
  // One client creates 1,100 claims: rate limits would measure themselves, not the payouts.
  serviceEnv: {
    CONFIRMATIONS: String(CONFIRMATIONS),
    MATCHING_VARIANT: "A",
    RATE_LIMIT_ENABLED: "false",
  },
});
try {
  await stack.mint(stack.payer.address, BigInt(BURST + SINGLES + 100) * 11n * USDC);
  const burstResult = await burst(stack);
  const singlesResult = await singles(stack);
  const seconds = (value: number) => `${value.toFixed(2)} s`;
  console.log(
    [
      "",
      `Burst: ${burstResult.payments} payments (${burstResult.paymentsInOneBlock} in one block), ${burstResult.completed} completed`,
      `  last payout mined ${burstResult.blocksAfterConfirmation} block(s) after the confirmation block (target ≤ 5)`,
      `  all completed ${seconds(burstResult.secondsAfterConfirmation)} after the confirmation block arrived`,
      `Singles: ${singlesResult.payments} payments, ${singlesResult.measured} measured, ${BLOCK_TIME_SECONDS} s blocks`,
      `  confirmation → completed: p50 ${seconds(singlesResult.p50)}, p95 ${seconds(singlesResult.p95)}, max ${seconds(singlesResult.max)}`,
      `  floor (wait for the next block): p50 ${seconds(singlesResult.floorP50)}, p95 ${seconds(singlesResult.floorP95)}`,
      `  p95 over the floor: ${seconds(singlesResult.p95 - singlesResult.floorP95)} (target: p95 ≤ block time + 1 s = ${BLOCK_TIME_SECONDS + 1} s)`,
      "",
    ].join("\n"),
  );
  console.log(JSON.stringify({ burst: burstResult, singles: singlesResult }));
} finally {
  await stack.stop();
}
