import type { AddressInfo } from "node:net";
import { createChainReader } from "./chain/publicClient.ts";
import type { ServiceConfig } from "./config.ts";
import { connectDatabase } from "./db/connect.ts";
import { migrate } from "./db/migrate.ts";
import { checkHealth } from "./health/checkHealth.ts";
import { createApp } from "./http/app.ts";
import { healthRoutes } from "./http/healthRoutes.ts";
import type { Logger } from "./logger.ts";

export interface RunningService {
  url: string;
  stop(): Promise<void>;
}

/**
 * One service process: migrations, then the HTTP surfaces (role `api`) and the workers
 * (role `worker`). Tests start it in-process; `api/main.ts` is the command-line wrapper.
 */
export async function startService(config: ServiceConfig, logger: Logger): Promise<RunningService> {
  const sql = connectDatabase(config.databaseUrl);
  await migrate(sql);
  const chain = createChainReader(config.chain.rpcUrl, config.chain.chainId);

  const app = createApp(
    [
      healthRoutes(() =>
        checkHealth({
          sql,
          chain,
          chainId: config.chain.chainId,
          maxIndexerLagBlocks: config.indexer.maxLagBlocks,
        }),
      ),
    ],
    logger,
  );

  const server = app.listen(config.http.port, config.http.host);
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  }).catch(async (error: NodeJS.ErrnoException) => {
    await sql.end({ timeout: 1 });
    if (error.code === "EADDRINUSE") {
      throw new Error(`port ${config.http.port} is already in use (set PORT to another one)`);
    }
    throw error;
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.http.host}:${port}`;
  logger.info({ url, role: config.role }, "service listening");

  return {
    url,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await sql.end({ timeout: 5 });
    },
  };
}
