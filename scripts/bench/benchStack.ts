import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  type Hex,
  http,
  publicActions,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { createLogger } from "../../api/logger.ts";
import { startService } from "../../api/service.ts";
import { testUsdcArtifact } from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole, devnetAccounts } from "../devnet/accounts.ts";
import { startAnvil } from "../devnet/anvil.ts";
import { devnetServiceEnv } from "../devnet/devnetServiceEnv.ts";
import { startEmbeddedPostgres } from "../devnet/embeddedPostgres.ts";
import { startPonder } from "../devnet/ponder.ts";
import { prepareDevnetChain } from "../devnet/prepareChain.ts";

/**
 * The whole service for a benchmark, as `npm start` runs it on the devnet (Anvil, PostgreSQL,
 * Ponder, the service in this process), with the service's default loop intervals.
 */
export async function startBenchStack(options: {
  /** Undefined: automine, a block per transaction. */
  blockTimeSeconds?: number;
  serviceEnv?: Record<string, string>;
}) {
  const stops: (() => Promise<void>)[] = [];
  const anvil = await startAnvil({
    port: 0,
    chainId: 8453,
    blockTimeSeconds: options.blockTimeSeconds,
    // Base's blocks hold far more than Anvil's default 30M gas; 1,000 transfers need ~50M.
    gasLimit: 400_000_000n,
  });
  stops.push(anvil.stop);
  const accounts = devnetAccounts();
  await prepareDevnetChain(anvil.rpcUrl, accounts, { forked: false });

  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const directory = await mkdtemp(join(tmpdir(), "bench-pg-"));
    await chmod(directory, 0o755);
    const server = await startEmbeddedPostgres({
      dataDirectory: join(directory, "data"),
      port: 54_000 + Math.floor(Math.random() * 1000),
      durable: false,
    });
    stops.push(async () => {
      await server.stop();
      await rm(directory, { recursive: true, force: true });
    });
    adminUrl = server.url();
  }
  const databaseName = `bench_${Date.now()}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${databaseName}`);
  await admin.end();
  const databaseUrl = Object.assign(new URL(adminUrl), { pathname: `/${databaseName}` }).toString();
  stops.push(async () => {
    const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await cleanup.unsafe(`drop database if exists ${databaseName} with (force)`);
    await cleanup.end();
  });

  const env = {
    ...devnetServiceEnv(accounts, { rpcUrl: anvil.rpcUrl, databaseUrl }),
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "warn",
    ...options.serviceEnv,
  };
  const ponder = startPonder({
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env, PORT: undefined },
    port: 43_000 + Math.floor(Math.random() * 1000),
    schema: "indexer_bench",
  });
  stops.push(ponder.stop);
  await ponder.waitUntilReady();

  const config = parseServiceConfig(env);
  const service = await startService(config, createLogger(config.logLevel));
  stops.push(service.stop);

  const chain = { ...base, rpcUrls: { default: { http: [anvil.rpcUrl] } } };
  const client = createTestClient({ chain, mode: "anvil", transport: http(anvil.rpcUrl) }).extend(
    publicActions,
  );
  const payer = accounts.find((account) => account.role === "user");
  if (!payer) throw new Error("no devnet user");
  const deployer = createWalletClient({
    chain,
    account: privateKeyToAccount(accountWithRole(accounts, "deployer").privateKey),
    transport: http(anvil.rpcUrl),
  });

  return {
    anvil,
    client,
    publicClient: createPublicClient({ chain, transport: http(anvil.rpcUrl), pollingInterval: 50 }),
    service,
    payer,
    payTo: accountWithRole(accounts, "pay_to").address,
    /** Mints devnet USDC to `to` and waits until it is mined. */
    async mint(to: Hex, amount: bigint) {
      const hash = await deployer.writeContract({
        address: BASE_USDC_ADDRESS,
        abi: testUsdcArtifact.abi,
        functionName: "mint",
        args: [to, amount],
      });
      await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    },
    async stop() {
      for (const stop of stops.reverse()) await stop();
    },
  };
}

export type BenchStack = Awaited<ReturnType<typeof startBenchStack>>;

/** Wall-clock time at which each new block was first seen, polled every 20 ms. */
export function watchBlockArrivals(stack: BenchStack) {
  const seenAt = new Map<bigint, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      const number = await stack.publicClient.getBlockNumber({ cacheTime: 0 });
      for (let block = number; block >= 0n && !seenAt.has(block); block--) {
        seenAt.set(block, Date.now());
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    seenAt,
    async stop() {
      running = false;
      await loop;
    },
  };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)] ?? Number.NaN;
}
