import postgres from "postgres";
import type { Hex } from "viem";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { type BenchProcess, samplePeakRss, startServiceProcess } from "./benchProcess.ts";
import { writeBenchResult } from "./benchResult.ts";
import {
  type BenchInfrastructure,
  percentile,
  startBenchInfrastructure,
  watchBlockArrivals,
} from "./benchStack.ts";
import {
  type BurstClaim,
  createClaims,
  mineUntilPoolEmpty,
  sendAll,
  signPayments,
  topUpPayoutWallet,
  watchIndexedBlocks,
} from "./burstPayments.ts";
import { startWebhookSink, type WebhookSink } from "./webhookSink.ts";

/**
 * `npm run bench:payouts` (method and results: BENCHMARKS.md#payouts). The service as `node
 * api/main.ts` in a process of its own, on Anvil with 2 s blocks and Base's block gas budget.
 *  1. Burst: BENCH_BURST payments (1,000; `npm run bench:payouts:long` sends 10,000) in as few
 *     blocks as they fit → the floor (the payouts' gas over the block gas limit, in blocks) and
 *     the blocks and seconds from the confirmation of the last payment until every claim is
 *     `completed`, with the service's memory and the database's time per payout.
 *  2. Latency: 100 single payments spread over 2 s blocks → per claim, time from the arrival of
 *     its confirmation block to `completed`, against the floor set by the chain itself (the
 *     wait for the next block, the earliest a payout can be mined), measured in the same run.
 * BENCH_WEBHOOKS=1 (`npm run bench:webhooks`): a receiver registered for every event besides
 * (webhookSink.ts): the payouts' figures with the deliveries running, and per phase the time from
 * a completion to its webhook's arrival and the deliveries a second (BENCHMARKS.md#webhooks).
 * BENCH_CPU_PROF=<dir> starts the service with `node --cpu-prof` there (summarizeProfile.ts);
 * BENCH_SERVICE_LOG=<file> keeps the service's log lines (level BENCH_LOG_LEVEL, default warn);
 * BENCH_ANVIL_LOG=<file> keeps Anvil's, one line per RPC method called (count them with
 * `grep -E '^(eth|anvil)_' <file> | sort | uniq -c`).
 */

const BLOCK_TIME_SECONDS = 2;
/**
 * Base's full block gas budget, "~400M gas" in docs.base.org's Throughput and Limits page
 * (base-chain/network-information/throughput-and-limits), read 2026-11-24.
 */
const BASE_BLOCK_GAS_LIMIT = 400_000_000n;
const CONFIRMATIONS = 3;
const BURST = Number(process.env.BENCH_BURST ?? 1000);
const SINGLES = Number(process.env.BENCH_SINGLES ?? 100);

interface Bench extends BenchInfrastructure {
  serviceUrl: string;
  service: BenchProcess;
  sql: postgres.Sql;
  webhooks: WebhookSink | null;
}

/** Claims `completed` in the bench's database so far. */
async function completedCount(bench: Bench): Promise<number> {
  const [row] = await bench.sql<{ done: number }[]>`
    select count(*)::int as done from app.claims where status = 'completed'`;
  return row?.done ?? 0;
}

/**
 * Waits until `claims` are completed, counted as completed claims beyond `completedBefore`
 * (nothing else completes meanwhile: the phases run one after another). Not by their ids: a
 * poll naming 10,000 ids cost PostgreSQL ~40 ms each, 7.8 s of its time over a burst, taken
 * from the service it measures.
 */
async function untilCompleted(
  bench: Bench,
  claims: BurstClaim[],
  completedBefore: number,
  timeoutMs: number,
) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await completedCount(bench)) >= completedBefore + claims.length) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return bench.sql<
    {
      id: string;
      completed_ms: number | null;
      payment_block: string;
      payout_block: string | null;
      payout_tx: string | null;
    }[]
  >`
    select c.id, (extract(epoch from c.completed_at) * 1000)::float8 as completed_ms,
      p.block_number::text as payment_block, po.block_number::text as payout_block,
      po.tx_hash as payout_tx
    from app.claims c
    join app.payments p on p.claim_id = c.id
    left join app.payouts po on po.claim_id = c.id and po.status = 'confirmed'
    where c.id = any(${claims.map((claim) => claim.claimId)})`;
}

/** Milliseconds PostgreSQL spent executing statements in the bench database, so far. */
async function databaseActiveMs(bench: Bench): Promise<number> {
  const [row] = await bench.sql<{ active_ms: number }[]>`
    select active_time::float8 as active_ms from pg_stat_database where datname = current_database()`;
  return row?.active_ms ?? Number.NaN;
}

/** Gas the payouts used, from their receipts, and the gas limit of each block they sit in. */
async function payoutGas(bench: Bench, payoutTxs: Hex[]) {
  let used = 0n;
  for (let start = 0; start < payoutTxs.length; start += 200) {
    const receipts = await Promise.all(
      payoutTxs
        .slice(start, start + 200)
        .map((hash) => bench.client.getTransactionReceipt({ hash })),
    );
    for (const receipt of receipts) used += receipt.gasUsed;
  }
  return used;
}

type CpuByProcess = Record<string, number | null>;

/** CPU seconds so far of the service and of every process it shares the two cores with. */
async function cpuByProcess(bench: Bench): Promise<CpuByProcess> {
  return { service: await bench.service.cpuSeconds(), ...(await bench.neighbourCpuSeconds()) };
}

function cpuSpent(before: CpuByProcess, after: CpuByProcess): CpuByProcess {
  return Object.fromEntries(
    Object.entries(after).map(([name, seconds]) => {
      const start = before[name];
      const spent = seconds === null || start == null ? null : seconds - start;
      return [name, spent === null ? null : Number(spent.toFixed(1))];
    }),
  );
}

/** Where a long run is, on stderr. */
function progress(step: string): void {
  console.error(`[${new Date().toISOString().slice(11, 19)}] ${step}`);
}

async function burst(bench: Bench) {
  const completedBefore = await completedCount(bench);
  const claims = await createClaims(bench.serviceUrl, BURST);
  progress(`${claims.length} claims created`);
  const raw = await signPayments(bench, claims);
  progress(`${raw.length} payments signed`);
  const arrivals = watchBlockArrivals(bench);
  const indexing = watchIndexedBlocks(bench.sql);
  const cpuBefore = await cpuByProcess(bench);
  const burstStarted = Date.now();
  // Hold the chain still while the payments enter the pool, then mine them into as few blocks
  // as their gas allows.
  await bench.client.request({ method: "evm_setIntervalMining" as never, params: [0] as never });
  const firstPaymentBlock = (await bench.client.getBlockNumber({ cacheTime: 0 })) + 1n;
  // BENCH_PAYMENTS_PER_BLOCK caps the payments per block (a 10,000-payment block stalled a
  // polling Ponder, BENCHMARKS.md#payouts); by default as many as the block's gas holds.
  const perBlock = Number(process.env.BENCH_PAYMENTS_PER_BLOCK ?? raw.length);
  for (let start = 0; start < raw.length; start += perBlock) {
    await sendAll(bench.anvil.rpcUrl, raw.slice(start, start + perBlock));
    await mineUntilPoolEmpty(bench);
  }
  const lastPaymentBlock = await bench.client.getBlockNumber({ cacheTime: 0 });
  progress(`payments mined in blocks ${firstPaymentBlock}–${lastPaymentBlock}`);
  const activeBefore = await databaseActiveMs(bench);
  const rss = samplePeakRss(bench.service);
  await bench.client.request({
    method: "evm_setIntervalMining" as never,
    params: [BLOCK_TIME_SECONDS] as never,
  });
  const confirmationBlock = lastPaymentBlock + BigInt(CONFIRMATIONS);
  // Sampled as soon as the block-arrival watch sees the confirmation block.
  const cpuAtConfirmation = arrivals
    .reached(confirmationBlock)
    .then(async (at) => ({ at, cpu: await cpuByProcess(bench) }));

  const rows = await untilCompleted(bench, claims, completedBefore, 30 * 60_000);
  progress("every claim completed, or the wait ended");
  const claimIds = claims.map((claim) => claim.claimId);
  await bench.webhooks?.untilCompletedWebhooks(claimIds, 5 * 60_000);
  const webhooks = await bench.webhooks?.figures(claimIds, { from: burstStarted, to: Date.now() });
  const peakRssMiB = rss.stop();
  const databaseMs = (await databaseActiveMs(bench)) - activeBefore;
  const cpuAfter = await cpuByProcess(bench);
  const burstSeconds = (Date.now() - burstStarted) / 1000;
  await arrivals.stop();
  await indexing.stop();
  const afterConfirmation = await cpuAtConfirmation;
  const completed = rows.filter((row) => row.completed_ms !== null);
  const payoutBlocks = completed.map((row) => Number(row.payout_block ?? 0));
  const lastPayoutBlock = BigInt(Math.max(...payoutBlocks));
  const firstPayoutBlock = BigInt(Math.min(...payoutBlocks));
  const lastCompleted = Math.max(...completed.map((row) => row.completed_ms as number));
  const confirmedAt = arrivals.seenAt.get(confirmationBlock) ?? Number.NaN;
  const gasUsed = await payoutGas(
    bench,
    completed.map((row) => row.payout_tx as Hex),
  );
  const gasLimitPerPayout = parseServiceConfig(bench.env).payouts.gasLimit;
  const stages = await stageTimeline(bench, claims, confirmedAt, arrivals.seenAt, indexing.seenAt);
  return {
    webhooks: webhooks ?? null,
    payments: claims.length,
    paymentBlocks: Number(lastPaymentBlock - firstPaymentBlock + 1n),
    completed: completed.length,
    blockGasLimit: Number(BASE_BLOCK_GAS_LIMIT),
    payoutGasUsed: Number(gasUsed),
    /** The payouts' gas over the block gas limit: no chain could mine them in fewer blocks. */
    floorBlocks: Number((gasUsed + BASE_BLOCK_GAS_LIMIT - 1n) / BASE_BLOCK_GAS_LIMIT),
    /** The same with each payout's gas limit, which is what a block builder packs by. */
    floorBlocksByGasLimit: Number(
      (BigInt(completed.length) * gasLimitPerPayout + BASE_BLOCK_GAS_LIMIT - 1n) /
        BASE_BLOCK_GAS_LIMIT,
    ),
    payoutBlocksUsed: Number(lastPayoutBlock - firstPayoutBlock + 1n),
    firstPayoutBlocksAfterConfirmation: Number(firstPayoutBlock - confirmationBlock),
    blocksAfterConfirmation: Number(lastPayoutBlock - confirmationBlock),
    secondsAfterConfirmation: (lastCompleted - confirmedAt) / 1000,
    servicePeakRssMiB: peakRssMiB,
    databaseMsPerPayout: databaseMs / Math.max(1, completed.length),
    /** From the first payment sent to the last completion: wall seconds, CPU by process. */
    burstSeconds,
    cpuSecondsByProcess: cpuSpent(cpuBefore, cpuAfter),
    /**
     * From the confirmation block's arrival to the last completion: the work that has to fit in
     * the target's blocks, against what two cores give in floor + 1 blocks.
     */
    afterConfirmation: {
      seconds: (lastCompleted - afterConfirmation.at) / 1000,
      cpuSecondsByProcess: cpuSpent(afterConfirmation.cpu, cpuAfter),
    },
    stages,
  };
}

/**
 * Where a burst's time went, stage by stage, from the rows' own timestamps: for each stage, the
 * seconds (relative to the arrival of the last payment's confirmation block) at which the first,
 * the middle and the last claim passed it. `indexed` is when Ponder's checkpoint reached the
 * payment's block (the matcher cannot see a payment before), `signed` is the start of the sign-and-store
 * transaction (`now()` inside it), `broadcast` the payout's last broadcast, `mined` the arrival
 * of its block.
 */
async function stageTimeline(
  bench: Bench,
  claims: BurstClaim[],
  confirmedAt: number,
  seenAt: Map<bigint, number>,
  indexedAt: Map<bigint, number>,
) {
  const rows = await bench.sql<
    {
      payment_block: string;
      matched_ms: number | null;
      signed_ms: number | null;
      broadcast_ms: number | null;
      payout_block: string | null;
      confirmed_ms: number | null;
      completed_ms: number | null;
    }[]
  >`
    select p.block_number::text as payment_block,
      (extract(epoch from p.matched_at) * 1000)::float8 as matched_ms,
      (extract(epoch from po.created_at) * 1000)::float8 as signed_ms,
      (extract(epoch from po.last_broadcast_at) * 1000)::float8 as broadcast_ms,
      po.block_number::text as payout_block,
      (extract(epoch from po.confirmed_at) * 1000)::float8 as confirmed_ms,
      (extract(epoch from c.completed_at) * 1000)::float8 as completed_ms
    from app.claims c
    join app.payments p on p.claim_id = c.id
    left join app.payouts po on po.claim_id = c.id
    where c.id = any(${claims.map((claim) => claim.claimId)})`;
  const stage = (values: (number | null | undefined)[]) => {
    const seconds = values.flatMap((value) =>
      value === null || value === undefined ? [] : [(value - confirmedAt) / 1000],
    );
    const round = (value: number) => Number(value.toFixed(2));
    return {
      first: round(Math.min(...seconds)),
      p50: round(percentile(seconds, 50)),
      last: round(Math.max(...seconds)),
    };
  };
  return {
    indexed: stage(rows.map((row) => indexedAt.get(BigInt(row.payment_block)))),
    matched: stage(rows.map((row) => row.matched_ms)),
    signed: stage(rows.map((row) => row.signed_ms)),
    broadcast: stage(rows.map((row) => row.broadcast_ms)),
    mined: stage(
      rows.map((row) => (row.payout_block ? seenAt.get(BigInt(row.payout_block)) : null)),
    ),
    confirmed: stage(rows.map((row) => row.confirmed_ms)),
    completed: stage(rows.map((row) => row.completed_ms)),
  };
}

async function singles(bench: Bench) {
  const singlesCompletedBefore = await completedCount(bench);
  const claims = await createClaims(bench.serviceUrl, SINGLES);
  const raw = await signPayments(bench, claims);
  const arrivals = watchBlockArrivals(bench);
  const singlesStarted = Date.now();
  // One payer's consecutive nonces: sent in order, each waits for the one before it to be known.
  for (const serializedTransaction of raw) {
    await bench.client.sendRawTransaction({ serializedTransaction });
    // Spread the payments over many blocks and over the whole block interval.
    await new Promise((resolve) => setTimeout(resolve, 150 + Math.random() * 500));
  }
  const rows = await untilCompleted(bench, claims, singlesCompletedBefore, 120_000);
  // One more block, so the floor of the last confirmation block is known too.
  const lastBlock = await bench.client.getBlockNumber({ cacheTime: 0 });
  while ((await bench.client.getBlockNumber({ cacheTime: 0 })) <= lastBlock) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  await arrivals.stop();
  const claimIds = claims.map((claim) => claim.claimId);
  await bench.webhooks?.untilCompletedWebhooks(claimIds, 60_000);
  const webhooks = await bench.webhooks?.figures(claimIds, {
    from: singlesStarted,
    to: Date.now(),
  });

  const latencies: number[] = [];
  const floors: number[] = [];
  for (const row of rows) {
    const confirmationBlock = BigInt(row.payment_block) + BigInt(CONFIRMATIONS);
    const confirmedAt = arrivals.seenAt.get(confirmationBlock);
    const nextBlockAt = arrivals.seenAt.get(confirmationBlock + 1n);
    if (row.completed_ms === null || confirmedAt === undefined || nextBlockAt === undefined)
      continue;
    latencies.push((row.completed_ms - confirmedAt) / 1000);
    floors.push((nextBlockAt - confirmedAt) / 1000);
  }
  return {
    webhooks: webhooks ?? null,
    payments: claims.length,
    measured: latencies.length,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    max: Math.max(...latencies),
    floorP50: percentile(floors, 50),
    floorP95: percentile(floors, 95),
  };
}

function webhookLines(
  phase: string,
  figures: Awaited<ReturnType<WebhookSink["figures"]>> | null,
): string[] {
  if (!figures) return [];
  return [
    `${phase} webhooks: ${figures.completedWebhooks} claim.completed received, completion → arrival p50 ${figures.completionToWebhookP50.toFixed(3)} s, p95 ${figures.completionToWebhookP95.toFixed(3)} s`,
    `  ${figures.deliveries} deliveries, ${figures.deliveriesPerSecond.toFixed(1)}/s over the phase, peak ${figures.peakDeliveriesPerSecond}/s; ${figures.rejected} failed verification`,
  ];
}

/**
 * The CPU spent after the confirmation block against the two cores' budget in floor + 1 blocks:
 * a total above the budget cannot meet the target on this machine, however it is scheduled.
 */
function afterConfirmationLine(result: Awaited<ReturnType<typeof burst>>): string {
  const spent = Object.entries(result.afterConfirmation.cpuSecondsByProcess).filter(
    (entry): entry is [string, number] => entry[1] !== null,
  );
  const total = spent.reduce((sum, [, seconds]) => sum + seconds, 0);
  const budget = 2 * (result.floorBlocks + 1) * BLOCK_TIME_SECONDS;
  return `  CPU seconds from that confirmation block to the last completion (${result.afterConfirmation.seconds.toFixed(1)} s): ${spent
    .map(([name, seconds]) => `${name} ${seconds}`)
    .join(", ")}; total ${total.toFixed(1)} against ${budget} in floor + 1 blocks on 2 cores`;
}

const infrastructure = await startBenchInfrastructure({
  blockTimeSeconds: BLOCK_TIME_SECONDS,
  gasLimit: BASE_BLOCK_GAS_LIMIT,
  // One client creates every claim: rate limits and the open-claims cap would measure
  // themselves, not the payouts.
  serviceEnv: {
    CONFIRMATIONS: String(CONFIRMATIONS),
    MATCHING_VARIANT: "A",
    RATE_LIMIT_ENABLED: "false",
    OPEN_CLAIMS_PER_CLIENT: "0",
    // BENCH_PAYOUT_BATCH_SIZE: payouts signed and broadcast per round (the service's default, 500).
    ...(process.env.BENCH_PAYOUT_BATCH_SIZE
      ? { PAYOUT_BATCH_SIZE: process.env.BENCH_PAYOUT_BATCH_SIZE }
      : {}),
  },
});
try {
  const service = await startServiceProcess(infrastructure.env);
  infrastructure.onStop(service.stop);
  const sql = postgres(infrastructure.databaseUrl, { max: 2, onnotice: () => {} });
  infrastructure.onStop(() => sql.end());
  const webhooks = process.env.BENCH_WEBHOOKS === "1" ? await startWebhookSink(sql) : null;
  if (webhooks) infrastructure.onStop(webhooks.stop);
  const bench: Bench = { ...infrastructure, service, serviceUrl: service.url, sql, webhooks };
  // A 10,000 burst emptied the devnet's payout wallet, and the singles after it then waited in
  // `paid` for funds (the service's warning said so) and measured 0.
  await topUpPayoutWallet(bench, BURST + SINGLES);

  const burstResult = await burst(bench);
  const singlesResult = SINGLES > 0 ? await singles(bench) : null;
  const seconds = (value: number) => `${value.toFixed(2)} s`;
  console.log(
    [
      "",
      `Burst: ${burstResult.payments} payments in ${burstResult.paymentBlocks} block(s) of ${burstResult.blockGasLimit / 1e6}M gas, ${burstResult.completed} completed`,
      `  floor: ${burstResult.floorBlocks} block(s) by the payouts' gas used (${(burstResult.payoutGasUsed / 1e6).toFixed(1)}M), ${burstResult.floorBlocksByGasLimit} by their gas limits`,
      `  payouts mined in ${burstResult.payoutBlocksUsed} block(s), the first ${burstResult.firstPayoutBlocksAfterConfirmation} and the last ${burstResult.blocksAfterConfirmation} block(s) after the last payment's confirmation block (target: floor + 1)`,
      `  all completed ${seconds(burstResult.secondsAfterConfirmation)} after that confirmation block arrived`,
      `  service peak RSS ${burstResult.servicePeakRssMiB.toFixed(0)} MiB; database time ${burstResult.databaseMsPerPayout.toFixed(2)} ms per payout`,
      `  CPU seconds from the first payment sent to the last completion (${burstResult.burstSeconds.toFixed(1)} s, 2 cores): ${Object.entries(
        burstResult.cpuSecondsByProcess,
      )
        .filter(([, spent]) => spent !== null)
        .map(([name, spent]) => `${name} ${spent}`)
        .join(", ")}`,
      afterConfirmationLine(burstResult),
      `  stages, seconds after that confirmation block (first / median / last):`,
      ...Object.entries(burstResult.stages).map(
        ([name, at]) => `    ${name.padEnd(10)} ${at.first} / ${at.p50} / ${at.last}`,
      ),
      ...(singlesResult
        ? [
            `Singles: ${singlesResult.payments} payments, ${singlesResult.measured} measured, ${BLOCK_TIME_SECONDS} s blocks`,
            `  confirmation → completed: p50 ${seconds(singlesResult.p50)}, p95 ${seconds(singlesResult.p95)}, max ${seconds(singlesResult.max)}`,
            `  floor (wait for the next block): p50 ${seconds(singlesResult.floorP50)}, p95 ${seconds(singlesResult.floorP95)}`,
            `  p95 over the floor: ${seconds(singlesResult.p95 - singlesResult.floorP95)} (target: p95 ≤ block time + 1 s = ${BLOCK_TIME_SECONDS + 1} s)`,
          ]
        : []),
      ...webhookLines("Burst", burstResult.webhooks),
      ...webhookLines("Singles", singlesResult?.webhooks ?? null),
      "",
    ].join("\n"),
  );
  await writeBenchResult({ burst: burstResult, singles: singlesResult });
} finally {
  await infrastructure.stop();
}
