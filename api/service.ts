import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { DNSResolver } from "mailauth";
import { a2aRoutes } from "./a2a/a2aRoutes.ts";
import { a2aPushNotification } from "./a2a/pushNotifications.ts";
import { createChainReader } from "./chain/publicClient.ts";
import type { ServiceConfig } from "./config/serviceConfig.ts";
import { createCore } from "./core/createCore.ts";
import type { SurfaceContext } from "./core/surfaceContext.ts";
import { connectDatabase, type Database } from "./db/connect.ts";
import { describeMigrations, migrate, SERVICE_SCHEMA } from "./db/migrate.ts";
import { openServicePools, type ServicePools, workerLockSession } from "./db/servicePools.ts";
import { graphqlRoutes } from "./graphql/graphqlRoutes.ts";
import { createAttentionCheckWorker } from "./health/attentionChecked.ts";
import { claimEventsRoutes } from "./http/claimEventsRoute.ts";
import { claimsRoutes } from "./http/claimsRoutes.ts";
import { documentationRoutes } from "./http/documentationRoutes.ts";
import { healthRoutes } from "./http/healthRoutes.ts";
import { ledgerRoutes } from "./http/ledgerRoutes.ts";
import { metricsRoutes } from "./http/metricsRoutes.ts";
import { offerRoutes } from "./http/offerRoutes.ts";
import { paymentsRoutes } from "./http/paymentsRoutes.ts";
import { receiptsRoutes } from "./http/receiptsRoutes.ts";
import { x402Routes } from "./http/x402Routes.ts";
import { createLedgerCountWorker } from "./ledger/ledgerCountWorker.ts";
import { createExpiryWorker } from "./lifecycle/expireClaims.ts";
import type { Logger } from "./logger.ts";
import { type RunningMail, startMail } from "./mail/mailSurface.ts";
import { createMatcherWorker } from "./matcher/matcherWorker.ts";
import { mcpRoutes } from "./mcp/mcpRoutes.ts";
import { createRowCountWorker } from "./metrics/rowCountWorker.ts";
import { serviceMetrics } from "./metrics/serviceMetrics.ts";
import { pageRoutes } from "./pages/pageRoutes.ts";
import { createPayoutWorkers } from "./payouts/payoutWorkers.ts";
import { requestCounts } from "./rateLimits/requestCounts.ts";
import type { ServiceDeps } from "./serviceDeps.ts";
import { localAccount, signingBackend } from "./signing/localAccount.ts";
import { createApp } from "./web/app.ts";
import { limitConnections } from "./web/connectionLimits.ts";
import { type Resolve, systemResolve } from "./webhooks/publicAddress.ts";
import { webhookTransport } from "./webhooks/sendWebhook.ts";
import { createWebhookWorker } from "./webhooks/webhookWorker.ts";
import { type RunningWorker, runWorker } from "./workers/runWorker.ts";
import { WAKE_CHANNELS } from "./workers/wakeChannels.ts";
import { createSettlementWatcher } from "./x402/watchSettlements.ts";
import { createX402Runtime } from "./x402/x402Runtime.ts";

export interface RunningService {
  /** Where the HTTP surfaces listen. */
  url: string;
  /** The HTTP surfaces' pool (`pools.http`). */
  sql: Database;
  /** One pool per kind of work (api/db/servicePools.ts). */
  pools: ServicePools;
  config: ServiceConfig;
  /** Where the SMTP intake listens (MAIL_INTAKE=smtp, ROLE api or all), else null. */
  smtpIntake: { host: string; port: number } | null;
  stop(): Promise<void>;
}

export interface ServiceOptions {
  /** DNS for the mail sender checks (MAIL_REQUIRE_AUTH); the system's when absent. */
  mailDnsResolver?: DNSResolver;
  /** How webhook targets' names resolve (a test's resolver); the system's when absent. */
  webhookResolver?: Resolve;
}

/**
 * One service process, and the composition root: everything is built here once (the database
 * pools, the chain reader, the x402 facilitator and terms, the use-cases) and handed down.
 * Migrations first, then the workers (unless the role is `api`) and the surfaces (unless it is
 * `worker`). Tests start it in-process; `api/main.ts` is the command-line wrapper.
 */
export async function startService(
  configured: ServiceConfig,
  logger: Logger,
  options: ServiceOptions = {},
): Promise<RunningService> {
  for (const warning of configured.warnings) logger.warn(warning);
  // Migrations on a connection of their own, without the pools' timeouts: a migration may
  // legitimately run long, and waits for another replica's under an advisory lock.
  const migrations = connectDatabase(configured.databaseUrl, {
    max: 1,
    name: "pay-and-earn migrations",
  });
  try {
    const { drifted, defined, unknown } = await migrate(migrations, SERVICE_SCHEMA, { logger });
    if (defined.length > 0) logger.info({ definitions: defined }, "schema definitions applied");
    if (unknown.length > 0) {
      logger.warn(
        { migrations: unknown },
        "this database has migrations this code does not know (a newer version applied them): " +
          "its schema definitions are kept, not replaced by this version's",
      );
    }
    if (drifted.length > 0) {
      logger.warn(
        { migrations: drifted },
        `migrations changed after this database applied them: ${describeMigrations(drifted)}; ` +
          "the database keeps what it applied, so a change belongs in a new migration",
      );
    }
  } finally {
    await migrations.end({ timeout: 5 });
  }
  const pools = openServicePools(configured);
  const sql = pools.http;
  const endPools = (timeout: number) =>
    Promise.all(Object.values(pools).map((pool) => pool.end({ timeout })));

  // Listen first: with PORT=0 and no PUBLIC_URL the service's own address is known only now,
  // and links in responses and receipts must use it.
  const server = createServer({
    headersTimeout: configured.httpServer.headersTimeoutMs,
    requestTimeout: configured.httpServer.requestTimeoutMs,
    keepAliveTimeout: configured.httpServer.keepAliveTimeoutMs,
    // How often Node looks for connections past headersTimeout or requestTimeout (30 s by
    // default, which would let a slow-headers client hold its socket that much longer).
    connectionsCheckingInterval: 1_000,
  });
  server.maxConnections = configured.httpServer.maxConnections;
  limitConnections(
    server,
    {
      idleMs: configured.httpServer.idleTimeoutMs,
      perAddress: configured.httpServer.connectionsPerIp,
      trustProxy: configured.trustProxy,
    },
    logger,
  );
  const port = await listen(server, configured.http.port, configured.http.host).catch(
    async (error: Error) => {
      await endPools(1);
      throw error;
    },
  );
  const config: ServiceConfig = configured.http.publicUrlConfigured
    ? configured
    : { ...configured, http: { ...configured.http, publicUrl: `http://localhost:${port}` } };
  const chain = createChainReader(config.chain.rpcUrl, config.chain.chainId);
  const deps: ServiceDeps = { sql, chain, config, logger };
  const x402 = createX402Runtime(config, chain, logger);
  const core = createCore(deps, x402);
  // The surfaces get the core and what they record into, never a pool.
  const metrics = serviceMetrics({ ...deps, core });
  const context: SurfaceContext = { core, config, logger, metrics };
  const app = createApp(
    [
      healthRoutes(context),
      metricsRoutes(context),
      ...(config.role === "worker"
        ? []
        : [
            offerRoutes(context),
            documentationRoutes(context),
            claimsRoutes(context),
            claimEventsRoutes(context),
            paymentsRoutes(context),
            receiptsRoutes(context),
            ledgerRoutes(context),
            pageRoutes(context),
            graphqlRoutes(context),
            x402Routes(context),
            mcpRoutes(context),
            a2aRoutes(context),
          ]),
    ],
    context,
    {
      requestCounts: requestCounts(pools.rateLimits, config.rateLimits.windowSeconds, logger),
    },
  );
  // Nothing async between listen() and here: a request that arrives meanwhile would find no
  // handler and hang for good (docs/traps.md#node-itself). The mail intake below waits on the
  // database (its first heartbeat), so it starts only once requests have their handler.
  server.on("request", app);
  const mail: RunningMail = await startMail({
    ...context,
    dnsResolver: options.mailDnsResolver,
    countSmtpRefusal: (reason) => metrics.countSmtpRefusal(reason),
  }).catch(async (error: Error) => {
    server.close();
    server.closeAllConnections();
    await endPools(1);
    throw error;
  });

  const workers: RunningWorker[] = [];
  if (config.role !== "api") {
    // The workers query through a pool of their own: a flood of requests holding HTTP
    // connections never keeps a payout from being signed or confirmed.
    const workerDeps: ServiceDeps = { ...deps, sql: pools.workers };
    const loops = [
      createMatcherWorker(workerDeps),
      createExpiryWorker(workerDeps),
      ...createPayoutWorkers(workerDeps, x402?.settleAndPay),
      ...(x402 ? [createSettlementWatcher(workerDeps, x402)] : []),
      createWebhookWorker(
        workerDeps,
        webhookTransport(
          config.webhooks,
          options.webhookResolver ?? systemResolve,
          localAccount(config.receipts.privateKey),
        ),
        (event, ids) => a2aPushNotification(config, event, ids),
      ),
      createLedgerCountWorker(workerDeps),
      createRowCountWorker(workerDeps),
      createAttentionCheckWorker(workerDeps),
    ];
    const connections = { lockSession: workerLockSession(config), notifications: pools.workers };
    for (const worker of loops) workers.push(runWorker(connections, worker, logger));
  }
  // The mail workers act through the core, whose queries use the HTTP pool; their locks and
  // wake-ups are the workers' like every loop's.
  const mailConnections = { lockSession: workerLockSession(config), notifications: pools.workers };
  for (const worker of mail.workers) workers.push(runWorker(mailConnections, worker, logger));
  if (workers.length > 0) void announceWorkers(workers, logger);

  // A claim completed in any process: the ledger's totals and stats are read anew.
  const completions =
    config.role === "worker"
      ? undefined
      : await sql
          .listen(WAKE_CHANNELS.claimsCompleted, () => context.core.claimsCompleted())
          .catch((error: unknown) => {
            logger.warn({ err: error }, "cannot listen for completions; ledger totals age out");
            return undefined;
          });
  const url = `http://${config.http.host}:${port}`;
  // Which signs payouts and receipts: libsecp256k1's binding, or viem where it did not load.
  logger.info({ url, role: config.role, signing: signingBackend() }, "service listening");

  return {
    url,
    sql,
    pools,
    config,
    smtpIntake: mail.smtpIntake,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await mail.stop();
      await Promise.all(workers.map((worker) => worker.stop()));
      await completions?.unlisten().catch(() => {});
      await context.core.stopEventStreams();
      await endPools(5);
    },
  };
}

/**
 * One line once every loop has had its first tick: which this replica runs (its lock taken,
 * its first tick done) and which another replica runs. A worker replica's readiness: its
 * health answers as soon as it listens, before any loop has done anything
 * (docs/operating.md#worker-replicas).
 */
async function announceWorkers(workers: RunningWorker[], logger: Logger): Promise<void> {
  const ticks = await Promise.all(
    workers.map(async (worker) => ({ name: worker.name, state: await worker.firstTick })),
  );
  if (ticks.some((tick) => tick.state === "stopped")) return;
  const named = (state: string) =>
    ticks.filter((tick) => tick.state === state).map((tick) => tick.name);
  logger.info({ holding: named("holding"), standing_by: named("standing_by") }, "workers running");
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
