import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createChainReader } from "./chain/publicClient.ts";
import { createExpiryWorker } from "./claims/expireClaims.ts";
import type { ServiceConfig } from "./config.ts";
import { connectDatabase, type Database } from "./db/connect.ts";
import { migrate } from "./db/migrate.ts";
import { graphqlRoutes } from "./graphql/graphqlRoutes.ts";
import { createApp } from "./http/app.ts";
import { claimsRoutes } from "./http/claimsRoutes.ts";
import { documentationRoutes } from "./http/documentationRoutes.ts";
import { healthRoutes } from "./http/healthRoutes.ts";
import { ledgerRoutes } from "./http/ledgerRoutes.ts";
import { metricsRoutes } from "./http/metricsRoutes.ts";
import { offerRoutes } from "./http/offerRoutes.ts";
import { paymentsRoutes } from "./http/paymentsRoutes.ts";
import { receiptsRoutes } from "./http/receiptsRoutes.ts";
import { x402Routes } from "./http/x402Routes.ts";
import type { Logger } from "./logger.ts";
import { createMatcherWorker } from "./matcher/matcherWorker.ts";
import { createPayoutWorkers } from "./payouts/payoutWorkers.ts";
import { type RunningWorker, runWorker } from "./workers/runWorker.ts";
import type { ServiceDeps } from "./workers/serviceDeps.ts";

export interface RunningService {
  /** Where the HTTP surfaces listen. */
  url: string;
  sql: Database;
  config: ServiceConfig;
  stop(): Promise<void>;
}

/**
 * One service process: migrations, then the HTTP surfaces and, unless the role is `api`, the
 * workers. Tests start it in-process; `api/main.ts` is the command-line wrapper.
 */
export async function startService(
  configured: ServiceConfig,
  logger: Logger,
): Promise<RunningService> {
  const sql = connectDatabase(configured.databaseUrl, { max: 20 });
  await migrate(sql);

  // Listen first: with PORT=0 and no PUBLIC_URL the service's own address is known only now,
  // and links in responses and receipts must use it.
  const server = createServer();
  const port = await listen(server, configured.http.port, configured.http.host).catch(
    async (error: Error) => {
      await sql.end({ timeout: 1 });
      throw error;
    },
  );
  const config: ServiceConfig = configured.http.publicUrlConfigured
    ? configured
    : { ...configured, http: { ...configured.http, publicUrl: `http://localhost:${port}` } };
  const chain = createChainReader(config.chain.rpcUrl, config.chain.chainId);
  const deps: ServiceDeps = { sql, chain, config, logger };

  const workers: RunningWorker[] = [];
  if (config.role !== "api") {
    for (const worker of [
      createMatcherWorker(deps),
      createExpiryWorker(deps),
      ...createPayoutWorkers(deps),
    ]) {
      workers.push(runWorker(sql, worker, logger));
    }
  }

  const app = createApp(
    [
      healthRoutes(deps),
      metricsRoutes(deps),
      ...(config.role === "worker"
        ? []
        : [
            offerRoutes(deps),
            documentationRoutes(deps),
            claimsRoutes(deps),
            paymentsRoutes(deps),
            receiptsRoutes(deps),
            ledgerRoutes(deps),
            graphqlRoutes(deps),
            x402Routes(deps),
          ]),
    ],
    deps,
  );
  server.on("request", app);
  const url = `http://${config.http.host}:${port}`;
  logger.info({ url, role: config.role }, "service listening");

  return {
    url,
    sql,
    config,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await Promise.all(workers.map((worker) => worker.stop()));
      await sql.end({ timeout: 5 });
    },
  };
}

function listen(
  server: ReturnType<typeof createServer>,
  port: number,
  host: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        error.code === "EADDRINUSE"
          ? new Error(`port ${port} is already in use (set PORT to another one)`)
          : error,
      );
    });
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}
