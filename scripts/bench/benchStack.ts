import { appendFileSync, existsSync } from "node:fs";
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
import { freePort } from "../../test/support/ports.ts";
import { accountWithRole, devnetAccounts } from "../devnet/accounts.ts";
import { startAnvil } from "../devnet/anvil.ts";
import { devnetServiceEnv } from "../devnet/devnetServiceEnv.ts";
import { startEmbeddedPostgres } from "../devnet/embeddedPostgres.ts";
import { type RunningPonder, startReadyPonder } from "../devnet/ponder.ts";
import { prepareDevnetChain } from "../devnet/prepareChain.ts";
import { processTreeCpuSeconds } from "./benchProcess.ts";

/**
 * Everything a benchmark's service runs on, as `npm start` sets it up on the devnet (Anvil,
 * PostgreSQL, Ponder), and the environment the service gets; the service itself is started by
 * startBenchStack (in this process) or startServiceProcess (a process of its own).
 */
export async function startBenchInfrastructure(options: {
  /** Undefined: automine, a block per transaction. */
  blockTimeSeconds?: number;
  /** Block gas limit; by default far above Anvil's 30M, which holds only ~600 transfers. */
  gasLimit?: bigint;
  serviceEnv?: Record<string, string>;
  /** False: no Ponder (payoutPath.ts with BENCH_NO_INDEXER, to see what the indexer costs). */
  indexer?: boolean;
  /** Server settings for the embedded PostgreSQL (not for DATABASE_URL's server). */
  postgresSettings?: Record<string, string>;
}) {
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  };
  // Ctrl-C or a timeout's SIGTERM: stop Anvil, Ponder, PostgreSQL and the service, not orphan them.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      console.error(`${signal}: stopping the benchmark's processes…`);
      void stopAll().finally(() => process.exit(130));
    });
  }
  try {
    const anvil = await startAnvil({
      port: 0,
      chainId: 8453,
      blockTimeSeconds: options.blockTimeSeconds,
      gasLimit: options.gasLimit ?? 400_000_000n,
      // BENCH_ANVIL_LOG=<file>: the node's own line per call says what the stack asks of it.
      logFile: process.env.BENCH_ANVIL_LOG,
    });
    stops.push(anvil.stop);
    const accounts = devnetAccounts();
    await prepareDevnetChain(anvil.rpcUrl, accounts, { forked: false });
    const { databaseUrl, databaseCpuSeconds } = await benchDatabase(
      stops,
      options.postgresSettings,
    );

    const env = {
      ...devnetServiceEnv(accounts, { rpcUrl: anvil.rpcUrl, databaseUrl }),
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "warn",
      ...options.serviceEnv,
    };
    // Stoppable from its start: ^C during the backfill must not leave it running (it is detached).
    let startedPonder: RunningPonder | undefined;
    stops.push(async () => startedPonder?.stop());
    const ponder =
      options.indexer === false
        ? null
        : await startReadyPonder(
            {
              env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env, PORT: undefined },
              schema: "indexer_bench",
              // BENCH_PONDER_LOG=<file>: the indexer's own lines, to see where it stands in a long run.
              ...(process.env.BENCH_PONDER_LOG
                ? {
                    onLog: (line: string) =>
                      appendFileSync(process.env.BENCH_PONDER_LOG as string, `${line}\n`),
                  }
                : {}),
            },
            freePort,
            {
              onStart: (started) => {
                startedPonder = started;
              },
            },
          );

    const chain = { ...base, rpcUrls: { default: { http: [anvil.rpcUrl] } } };
    // Mining thousands of transactions into one block keeps Anvil busy for many seconds.
    const transport = http(anvil.rpcUrl, { timeout: 300_000 });
    const client = createTestClient({ chain, mode: "anvil", transport }).extend(publicActions);
    const payer = accounts.find((account) => account.role === "user");
    if (!payer) throw new Error("no devnet user");
    const deployer = createWalletClient({
      chain,
      account: privateKeyToAccount(accountWithRole(accounts, "deployer").privateKey),
      transport: http(anvil.rpcUrl),
    });
    return {
      anvil,
      env,
      databaseUrl,
      /**
       * CPU seconds used so far by the processes the service shares the machine with (Anvil,
       * Ponder, the embedded PostgreSQL, this benchmark), null for one not started here.
       */
      async neighbourCpuSeconds() {
        const own = process.cpuUsage();
        return {
          anvil: await processTreeCpuSeconds(anvil.process.pid as number),
          indexer: ponder ? await processTreeCpuSeconds(ponder.process.pid as number) : null,
          database: databaseCpuSeconds ? await databaseCpuSeconds() : null,
          benchmark: (own.user + own.system) / 1e6,
        };
      },
      /** CPU seconds the embedded PostgreSQL has used so far; null on DATABASE_URL's server. */
      databaseCpuSeconds,
      client,
      publicClient: createPublicClient({ chain, transport, pollingInterval: 50 }),
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
      /** Runs `stop` first when everything stops (before the database and the chain go). */
      onStop(stop: () => Promise<void>) {
        stops.push(stop);
      },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * Where the embedded PostgreSQL keeps its files: memory (/dev/shm) where there is one, else the
 * temporary directory; BENCH_PG_DIR chooses. Its fsync is off either way, but on the shared
 * virtual disk of these machines its writes still waited for I/O (half the CPU time in iowait
 * during a run), and POST /api/claims's p99 measured that wait, 46 ms in one run and 400 ms in
 * the next.
 */
export function memoryBackedDirectory(): string {
  if (process.env.BENCH_PG_DIR) return process.env.BENCH_PG_DIR;
  return existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
}

/** A new database for this run: on DATABASE_URL's server, or on an embedded PostgreSQL. */
async function benchDatabase(
  stops: (() => Promise<void>)[],
  settings: Record<string, string> | undefined,
) {
  let adminUrl = process.env.DATABASE_URL;
  let databaseCpuSeconds: (() => Promise<number>) | null = null;
  if (!adminUrl) {
    const directory = await mkdtemp(join(memoryBackedDirectory(), "bench-pg-"));
    await chmod(directory, 0o755);
    const server = await startEmbeddedPostgres({
      dataDirectory: join(directory, "data"),
      port: await freePort(),
      durable: false,
      ...(settings ? { settings } : {}),
    });
    stops.push(async () => {
      await server.stop();
      await rm(directory, { recursive: true, force: true });
    });
    adminUrl = server.url();
    const postmaster = server.process.pid as number;
    databaseCpuSeconds = () => processTreeCpuSeconds(postmaster);
  }
  const serverUrl = adminUrl;
  const databaseName = `bench_${Date.now()}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${databaseName}`);
  await admin.end();
  stops.push(async () => {
    const cleanup = postgres(serverUrl, { max: 1, onnotice: () => {} });
    await cleanup.unsafe(`drop database if exists ${databaseName} with (force)`);
    await cleanup.end();
  });
  return {
    databaseUrl: Object.assign(new URL(serverUrl), { pathname: `/${databaseName}` }).toString(),
    databaseCpuSeconds,
  };
}

export type BenchInfrastructure = Awaited<ReturnType<typeof startBenchInfrastructure>>;

/** The whole service for a benchmark, the service in this process with its default loops. */
export async function startBenchStack(options: Parameters<typeof startBenchInfrastructure>[0]) {
  const infrastructure = await startBenchInfrastructure(options);
  try {
    const config = parseServiceConfig(infrastructure.env);
    const service = await startService(config, createLogger(config.logLevel));
    infrastructure.onStop(service.stop);
    return { ...infrastructure, service };
  } catch (error) {
    await infrastructure.stop();
    throw error;
  }
}

export type BenchStack = Awaited<ReturnType<typeof startBenchStack>>;

/** Wall-clock time at which each new block was first seen, polled every 20 ms. */
export function watchBlockArrivals(stack: BenchInfrastructure) {
  // A poll that fails (Anvil busy mining a huge block) is simply a poll missed.
  return watchHeight(() => stack.publicClient.getBlockNumber({ cacheTime: 0 }), 20);
}

/**
 * Wall-clock time at which `read` (a block height: the chain's head, the indexer's checkpoint)
 * first reached each block, polled every `intervalMs`; a failed read is a poll missed.
 */
export function watchHeight(read: () => Promise<bigint | null>, intervalMs: number) {
  const seenAt = new Map<bigint, number>();
  const waiting: { block: bigint; resolve: (at: number) => void }[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const height = await read().catch(() => null);
      for (let block = height ?? -1n; block >= 0n && !seenAt.has(block); block--) {
        seenAt.set(block, Date.now());
      }
      for (const waiter of waiting.splice(0)) {
        const at = seenAt.get(waiter.block);
        if (at === undefined) waiting.push(waiter);
        else waiter.resolve(at);
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    seenAt,
    /** Settles, with when, as soon as a poll has seen `block` (never if the watch stops first). */
    reached(block: bigint): Promise<number> {
      return new Promise((resolve) => waiting.push({ block, resolve }));
    },
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
