import { execFile } from "node:child_process";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { x402ResourceServer } from "@x402/core/server";
import { ExactEvmScheme as ExactEvmClient } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware } from "@x402/express";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import express from "express";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createFacilitator } from "../../api/x402/facilitator.ts";
import { percentile, startBenchStack } from "./benchStack.ts";

/**
 * `npm run bench:x402` (method and results: BENCHMARKS.md).
 *  1. Latency of a paid request to POST /api/x402/earn (settle, then pay out, wait for the
 *     payout to be mined and the receipt) against a reference endpoint built with
 *     @x402/express's paymentMiddleware and the same in-process facilitator on the same chain
 *     (settlement only, no payout), requests interleaved, with the official client.
 *  2. Throughput of the unpaid 402 answer against a bare Express JSON route, with a load
 *     generator in its own process, rounds alternated.
 */

const PAID_REQUESTS = Number(process.env.BENCH_PAID ?? 40);
const LOAD_SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 5);
const LOAD_CONCURRENCY = 16;
const USDC = 1_000_000n;

// Automine: a transaction is mined as it arrives, so chain time is the same tiny constant for
// both endpoints and what remains is what each does around it.
// BENCH_RATE_LIMITS=on measures with the PostgreSQL-backed limiter counting every request
// (limits set too high to refuse any); by default it is off, to measure the route alone.
const rateLimited = process.env.BENCH_RATE_LIMITS === "on";
const stack = await startBenchStack({
  serviceEnv: rateLimited
    ? {
        RATE_LIMIT_ENABLED: "true",
        RATE_LIMIT_READS: "1000000000",
        RATE_LIMIT_WRITES: "1000000000",
      }
    : { RATE_LIMIT_ENABLED: "false" },
});
const servers: { close(callback: () => void): void }[] = [];

function listen(app: express.Express): Promise<string> {
  return new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => {
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    });
    servers.push(server);
  });
}

async function referenceEndpoint(): Promise<string> {
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

async function timedPayment(url: string, pay: typeof fetch): Promise<number> {
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
  return performance.now() - started;
}

async function latency() {
  const payer = privateKeyToAccount(stack.payer.privateKey);
  const client = x402Client.fromConfig({
    schemes: [{ network: "eip155:8453", client: new ExactEvmClient(payer) }],
    spendControls: { maxAmountPerPayment: "$10" },
  });
  const pay = wrapFetchWithPayment(fetch, client);
  const reference = `${await referenceEndpoint()}/reference`;
  const ours = `${stack.service.url}/api/x402/earn`;
  for (let warmup = 0; warmup < 3; warmup++) {
    await timedPayment(reference, pay);
    await timedPayment(ours, pay);
  }
  const samples = { reference: [] as number[], ours: [] as number[] };
  for (let index = 0; index < PAID_REQUESTS; index++) {
    samples.reference.push(await timedPayment(reference, pay));
    samples.ours.push(await timedPayment(ours, pay));
  }
  const summary = (values: number[]) => ({
    p50: percentile(values, 50),
    p95: percentile(values, 95),
  });
  return {
    requests: PAID_REQUESTS,
    reference: summary(samples.reference),
    ours: summary(samples.ours),
  };
}

async function load(url: string, body: unknown): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, [
    join(import.meta.dirname, "loadGenerator.ts"),
    url,
    JSON.stringify(body),
    String(LOAD_CONCURRENCY),
    String(LOAD_SECONDS * 1000),
  ]);
  const result = JSON.parse(stdout) as { rps: number; statuses: Record<string, number> };
  const expected = url.endsWith("/earn") ? "402" : "200";
  if (Object.keys(result.statuses).some((status) => status !== expected)) {
    throw new Error(`unexpected statuses from ${url}: ${JSON.stringify(result.statuses)}`);
  }
  return result.rps;
}

async function throughput() {
  const bare = `${await bareEndpoint()}/bare`;
  const ours = `${stack.service.url}/api/x402/earn`;
  const body = { payout_address: "0x000000000000000000000000000000000000dEaD", agent_name: "load" };
  const rounds: { bare: number; ours: number }[] = [];
  for (let round = 0; round < 3; round++) {
    rounds.push({ bare: await load(bare, body), ours: await load(ours, body) });
  }
  const ratios = rounds.map((round) => round.ours / round.bare).sort((a, b) => a - b);
  return { rounds, medianRatio: ratios[1] ?? Number.NaN };
}

try {
  await stack.mint(stack.payer.address, BigInt(PAID_REQUESTS * 2 + 20) * 10n * USDC);
  const paid = await latency();
  const unpaid = await throughput();
  const ms = (value: number) => `${value.toFixed(1)} ms`;
  console.log(
    [
      "",
      `Paid requests (${paid.requests} each, interleaved, official client, automine):`,
      `  reference (paymentMiddleware, settle only): p50 ${ms(paid.reference.p50)}, p95 ${ms(paid.reference.p95)}`,
      `  POST /api/x402/earn (settle + payout + receipt): p50 ${ms(paid.ours.p50)}, p95 ${ms(paid.ours.p95)}`,
      `  overhead beyond settlement, p50: ${ms(paid.ours.p50 - paid.reference.p50)} (target ≤ 50 ms; includes the payout's own mining)`,
      `Unpaid 402 throughput vs bare Express (${LOAD_CONCURRENCY} connections, ${LOAD_SECONDS} s rounds, rate limits ${rateLimited ? "on" : "off"}):`,
      ...unpaid.rounds.map(
        (round, index) =>
          `  round ${index + 1}: bare ${round.bare.toFixed(0)} req/s, 402 path ${round.ours.toFixed(0)} req/s (${((round.ours / round.bare) * 100).toFixed(0)}%)`,
      ),
      `  median ratio: ${(unpaid.medianRatio * 100).toFixed(0)}% (target ≥ 50%)`,
      "",
    ].join("\n"),
  );
  console.log(JSON.stringify({ paid, unpaid }));
} finally {
  for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
  await stack.stop();
}
