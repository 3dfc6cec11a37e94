import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import type { Router } from "express";
import { createChainReader } from "../../api/chain/publicClient.ts";
import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { createCore } from "../../api/core/createCore.ts";
import type { SurfaceContext } from "../../api/core/surfaceContext.ts";
import type { Database } from "../../api/db/connect.ts";
import { createLogger } from "../../api/logger.ts";
import { serviceMetrics } from "../../api/metrics/serviceMetrics.ts";
import { requestCounts } from "../../api/rateLimits/requestCounts.ts";
import type { ServiceDeps } from "../../api/serviceDeps.ts";
import { createApp } from "../../api/web/app.ts";

/**
 * `createApp` on a port of its own with routers the test brings (e.g. one that throws, which
 * production never mounts) and a logger whose lines the test can read.
 */
export async function startTestApp(options: {
  sql: Database;
  config: ServiceConfig;
  /** Built from the app's own deps, like the service's routers. */
  routers?: (context: SurfaceContext) => Router[];
  /** The rate limiter's own pool, as the service gives it one; `sql` if unset. */
  rateLimitSql?: Database;
}) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  const logger = createLogger("debug", "test-app", sink);
  const deps: ServiceDeps = {
    sql: options.sql,
    chain: createChainReader(options.config.chain.rpcUrl, options.config.chain.chainId),
    config: options.config,
    logger,
  };
  const core = createCore(deps, null);
  const context: SurfaceContext = {
    core,
    config: deps.config,
    logger,
    metrics: serviceMetrics({ ...deps, core }),
  };
  const app = createApp(options.routers?.(context) ?? [], context, {
    requestCounts: requestCounts(
      options.rateLimitSql ?? options.sql,
      options.config.rateLimits.windowSeconds,
      logger,
    ),
  });
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    server,
    deps: context,
    /** Every log line written so far, parsed. */
    logLines: () => lines,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
