import type { AddressInfo } from "node:net";
import { x402ResourceServer } from "@x402/core/server";
import { ExactEvmScheme as ExactEvmClient } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware } from "@x402/express";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import express from "express";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createFacilitator } from "../../api/x402/facilitator.ts";
import { writeBenchResult } from "./benchResult.ts";
import { type BenchStack, percentile, startBenchStack } from "./benchStack.ts";
import { runLoad, unexpectedStatuses } from "./loadRounds.ts";

/**
 * `npm run bench:x402` (method and results: BENCHMARKS.md#x402).
 *  1. Latency of a paid request to POST /api/x402/earn (settle and pay out, in one transaction
 *     with SettleAndPay on the devnet, wait for it to be mined and the receipt) against a reference endpoint built with
 *     @x402/express's paymentMiddleware and the same in-process facilitator on the same chain
 *     (settlement only, no payout), requests interleaved, with the official client.
 *     On an automine chain (chain time near zero: what each side does around it), then on
 *     2 s blocks like Base's, where both are also counted in blocks.
 *  2. Throughput of the unpaid 402 answer, ours and the reference's, against a bare Express
 *     JSON route in the same process, with autocannon in its own process, rounds alternated.
 */

const PAID_REQUESTS = Number(process.env.BENCH_PAID ?? 40);
const PAID_ON_BLOCKS = Number(process.env.BENCH_PAID_ON_BLOCKS ?? 10);
const BLOCK_TIME_SECONDS = 2;
const LOAD_SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 4);
const LOAD_CONNECTIONS = 50;
const USDC = 1_000_000n;

// Automine: a transaction is mined as it arrives, so chain time is the same tiny constant for
// both endpoints and what remains is what each does around it.
// BENCH_RATE_LIMITS=on measures with the PostgreSQL-backed limiter counting every request
// (limits set too high to refuse any); by default it is off, to measure the route alone.
const rateLimited = process.env.BENCH_RATE_LIMITS === "on";
const serviceEnv: Record<string, string> = rateLimited
  ? {
      RATE_LIMIT_ENABLED: "true",
      RATE_LIMIT_READS: "1000000000",
      RATE_LIMIT_WRITES: "1000000000",
      OPEN_CLAIMS_PER_CLIENT: "0",
    }
  : { RATE_LIMIT_ENABLED: "false", OPEN_CLAIMS_PER_CLIENT: "0" };
const servers: { close(callback: () => void): void }[] = [];

function listen(app: express.Express): Promise<string> {
  return new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => {
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    });
    servers.push(server);
  });
}

async function referenceEndpoint(stack: BenchStack): Promise<string> {
  const facilitator = createFacilitator(stack.service.config);
  if (!facilitator) throw new Error("no facilitator");
  const server = new x402ResourceServer(facilitator.client).register(
    "eip155:8453",
    new ExactEvmScheme(),
  );
  const app = express();
  app.use(express.json());
  app.use(
    paymentMiddleware(
      {
        "POST /reference": {
          accepts: { scheme: "exact", network: "eip155:8453", payTo: stack.payTo, price: "$10" },
          description: "settlement only",
        },
      },
      server,
    ),
  );
  app.post("/reference", (_request, response) => {
    response.json({ ok: true });
  });
  return listen(app);
}

function bareEndpoint(): Promise<string> {
  const app = express();
  app.use(express.json({ limit: "16kb" }));
  app.post("/bare", (request, response) => {
    response.json({ ok: true, echoed: Object.keys(request.body ?? {}).length });
  });
  return listen(app);
}

interface PaidSample {
  ms: number;
  /** Blocks mined between the request and its answer. */
  blocks: number;
}

async function timedPayment(
  stack: BenchStack,
  url: string,
  pay: typeof fetch,
): Promise<PaidSample> {
  const blockBefore = await stack.client.getBlockNumber({ cacheTime: 0 });
  const started = performance.now();
  const response = await pay(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ payout_address: privateKeyToAccount(generatePrivateKey()).address }),
  });
  const body = (await response.json()) as { status?: string };
  if (response.status !== 200) throw new Error(`paid request answered ${response.status}`);
  if (url.endsWith("/earn") && body.status !== "completed") {
    throw new Error(`claim not completed in the answer: ${body.status}`);
  }
  const ms = performance.now() - started;
  const blockAfter = await stack.client.getBlockNumber({ cacheTime: 0 });
  return { ms, blocks: Number(blockAfter - blockBefore) };
}

async function latency(stack: BenchStack, requests: number) {
  const payer = privateKeyToAccount(stack.payer.privateKey);
  const client = x402Client.fromConfig({
    schemes: [{ network: "eip155:8453", client: new ExactEvmClient(payer) }],
    spendControls: { maxAmountPerPayment: "$10" },
  });
  const pay = wrapFetchWithPayment(fetch, client);
  const reference = `${await referenceEndpoint(stack)}/reference`;
  const ours = `${stack.service.url}/api/x402/earn`;
  for (let warmup = 0; warmup < 2; warmup++) {
    await timedPayment(stack, reference, pay);
    await timedPayment(stack, ours, pay);
  }
  const samples = { reference: [] as PaidSample[], ours: [] as PaidSample[] };
  for (let index = 0; index < requests; index++) {
    samples.reference.push(await timedPayment(stack, reference, pay));
    samples.ours.push(await timedPayment(stack, ours, pay));
  }
  const summary = (values: PaidSample[]) => ({
    p50: percentile(
      values.map((value) => value.ms),
      50,
    ),
    p95: percentile(
      values.map((value) => value.ms),
      95,
    ),
    blocksP50: percentile(
      values.map((value) => value.blocks),
      50,
    ),
    blocksMax: Math.max(...values.map((value) => value.blocks)),
  });
  return { requests, reference: summary(samples.reference), ours: summary(samples.ours) };
}

async function throughput(stack: BenchStack) {
  const bare = `${await bareEndpoint()}/bare`;
  const reference = `${await referenceEndpoint(stack)}/reference`;
  const ours = `${stack.service.url}/api/x402/earn`;
  const body = { payout_address: "0x000000000000000000000000000000000000dEaD", agent_name: "load" };
  const load = async (url: string, expected: number, durationSeconds = LOAD_SECONDS) => {
    const result = await runLoad({
      url,
      method: "POST",
      body,
      connections: LOAD_CONNECTIONS,
      durationSeconds,
    });
    if (result.errors + unexpectedStatuses(result, expected) > 0) {
      throw new Error(`unexpected answers from ${url}: ${JSON.stringify(result)}`);
    }
    return result;
  };
  for (const url of [bare, reference, ours]) await load(url, url === bare ? 200 : 402, 1);
  const rounds: { bare: number; reference: number; ours: number; oursP99: number }[] = [];
  for (let round = 0; round < 3; round++) {
    const bareRun = await load(bare, 200);
    const referenceRun = await load(reference, 402);
    const oursRun = await load(ours, 402);
    rounds.push({
      bare: bareRun.rps,
      reference: referenceRun.rps,
      ours: oursRun.rps,
      oursP99: oursRun.p99,
    });
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[1] ?? Number.NaN;
  return {
    rounds,
    oursShare: median(rounds.map((round) => round.ours / round.bare)),
    referenceShare: median(rounds.map((round) => round.reference / round.bare)),
  };
}

async function closeServers() {
  for (const server of servers.splice(0)) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Automine: paid latency and unpaid throughput. */
async function onAutomine() {
  const stack = await startBenchStack({ serviceEnv });
  try {
    await stack.mint(stack.payer.address, BigInt(PAID_REQUESTS * 2 + 20) * 10n * USDC);
    return { paid: await latency(stack, PAID_REQUESTS), unpaid: await throughput(stack) };
  } finally {
    await closeServers();
    await stack.stop();
  }
}

/** 2 s blocks, like Base: paid latency in seconds and in blocks. */
async function onBlocks() {
  const stack = await startBenchStack({ blockTimeSeconds: BLOCK_TIME_SECONDS, serviceEnv });
  try {
    await stack.mint(stack.payer.address, BigInt(PAID_ON_BLOCKS * 2 + 20) * 10n * USDC);
    return await latency(stack, PAID_ON_BLOCKS);
  } finally {
    await closeServers();
    await stack.stop();
  }
}

const automine = await onAutomine();
const blocks = await onBlocks();
const ms = (value: number) => `${value.toFixed(1)} ms`;
const seconds = (value: number) => `${(value / 1000).toFixed(2)} s`;
const { paid, unpaid } = automine;
console.log(
  [
    "",
    `Paid requests (${paid.requests} each, interleaved, official client, automine):`,
    `  reference (paymentMiddleware, settle only): p50 ${ms(paid.reference.p50)}, p95 ${ms(paid.reference.p95)}`,
    `  POST /api/x402/earn (settle + payout + receipt): p50 ${ms(paid.ours.p50)}, p95 ${ms(paid.ours.p95)}`,
    `  overhead beyond settlement, p50: ${ms(paid.ours.p50 - paid.reference.p50)} (target ≤ 50 ms; includes the payout's own mining)`,
    `Paid requests on ${BLOCK_TIME_SECONDS} s blocks (${blocks.requests} each, interleaved):`,
    `  reference (settle only): p50 ${seconds(blocks.reference.p50)}, p95 ${seconds(blocks.reference.p95)}; blocks p50 ${blocks.reference.blocksP50}, max ${blocks.reference.blocksMax}`,
    `  ours (settle + payout + receipt): p50 ${seconds(blocks.ours.p50)}, p95 ${seconds(blocks.ours.p95)}; blocks p50 ${blocks.ours.blocksP50}, max ${blocks.ours.blocksMax}`,
    `  ours / settle-only: p50 ${(blocks.ours.p50 / blocks.reference.p50).toFixed(2)}, p95 ${(blocks.ours.p95 / blocks.reference.p95).toFixed(2)} (target ≤ 1.10: settlement and payout in one transaction, docs/payments.md#one-transaction-settlement)`,
    `Unpaid 402 vs bare Express, same process (${LOAD_CONNECTIONS} connections, ${LOAD_SECONDS} s rounds, autocannon, rate limits ${rateLimited ? "on" : "off"}):`,
    ...unpaid.rounds.map(
      (round, index) =>
        `  round ${index + 1}: bare ${round.bare.toFixed(0)} req/s, reference 402 ${round.reference.toFixed(0)} (${((round.reference / round.bare) * 100).toFixed(0)}%), ours 402 ${round.ours.toFixed(0)} (${((round.ours / round.bare) * 100).toFixed(0)}%), ours p99 ${round.oursP99} ms`,
    ),
    `  median share of bare: ours ${(unpaid.oursShare * 100).toFixed(0)}% (target ≥ 60%), reference ${(unpaid.referenceShare * 100).toFixed(0)}%`,
    "",
  ].join("\n"),
);
await writeBenchResult({ automine, blocks, rateLimited });
