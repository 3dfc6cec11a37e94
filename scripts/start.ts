import { type ChildProcess, spawn } from "node:child_process";
import { join, resolve } from "node:path";
import postgres from "postgres";
import { createPublicClient, http } from "viem";
import { parseIndexerConfig } from "../api/config/indexerConfig.ts";
import { parseServiceConfig } from "../api/config/serviceConfig.ts";
import { ConfigError } from "../api/config/settings.ts";
import { redactUrl, redactUrlsIn } from "../api/redaction.ts";
import { devnetAccounts } from "./devnet/accounts.ts";
import { startAnvil } from "./devnet/anvil.ts";
import { startDevnetMail } from "./devnet/devnetMail.ts";
import { devnetServiceEnv } from "./devnet/devnetServiceEnv.ts";
import { startEmbeddedPostgres } from "./devnet/embeddedPostgres.ts";
import { type LauncherConfig, parseLauncherConfig } from "./devnet/launcherConfig.ts";
import { indexerEnvironment, indexerSchemaName, startPonder } from "./devnet/ponder.ts";
import { assertPortFree } from "./devnet/ports.ts";
import { prepareDevnetChain } from "./devnet/prepareChain.ts";
import { waitForExit } from "./devnet/processes.ts";
import { recordProcess, recordProcessesIn, stopRecorded } from "./devnet/processRecords.ts";
import { writeDevnetState } from "./devnet/state.ts";

/**
 * `npm start`. Without RPC_URL: a whole local devnet (Anvil with USDC at its Base address,
 * an embedded PostgreSQL unless DATABASE_URL is set, Ponder, the service). With RPC_URL: Ponder
 * and the service against the configured chain and database. Ctrl-C or SIGTERM stops every
 * child in reverse order of start; a child that dies takes the others down with it. Each child
 * is recorded under DEVNET_DIR/processes, so that a start after a launcher that was killed
 * (SIGKILL, a closed terminal) first stops what that one left running.
 */

type Stop = { name: string; stop: () => Promise<void> };
const running: Stop[] = [];
let shuttingDown = false;

async function shutdown(exitCode: number, why?: string): Promise<void> {
  // `npm start` under Ctrl-C delivers the signal twice (the terminal and npm both send it):
  // the second one must not cut the orderly stop short and orphan the children.
  if (shuttingDown) return;
  shuttingDown = true;
  if (why) console.error(redactUrlsIn(why));
  for (const child of running.reverse()) {
    console.error(`Stopping ${child.name}…`);
    await child.stop().catch((error: Error) => {
      console.error(redactUrlsIn(`Stopping ${child.name} failed: ${error.message}`));
    });
  }
  process.exit(exitCode);
}

process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));

/** One line per step, so a slow start shows where it is. URLs are printed without their keys. */
function progress(step: string): void {
  console.log(redactUrlsIn(step));
}

function track(name: string, stop: () => Promise<void>, child?: ChildProcess): void {
  running.push({ name, stop });
  child?.once("exit", (code, signal) => {
    if (!shuttingDown) {
      void shutdown(
        1,
        `${name} exited unexpectedly (${signal ?? `code ${code}`}); stopping everything.`,
      );
    }
  });
}

async function main(): Promise<void> {
  const launcher = parseLauncherConfig();
  const processFolder = join(launcher.devnetDirectory, "processes");
  recordProcessesIn(processFolder);
  // Ponder needs its database to release its schema lock: give it the time it takes.
  const leftovers = await stopRecorded(processFolder, { graceMs: 20_000 });
  if (leftovers.length > 0) {
    const names = leftovers.map((record) => `${record.name} (pid ${record.pid})`).join(", ");
    progress(`Stopped what an earlier npm start left running: ${names}.`);
  }
  const childEnv = launcher.mode === "devnet" ? await startDevnet(launcher) : { ...process.env };

  const service = parseServiceConfig(childEnv);
  const indexer = parseIndexerConfig(childEnv);
  await assertPortFree(launcher.ponderPort, "Ponder", "PONDER_PORT");
  await assertPortFree(service.http.port, "the service", "PORT");
  if (service.mail.intake === "smtp" && service.role !== "worker") {
    await assertPortFree(service.mail.smtpIntake.port, "the SMTP intake", "SMTP_INTAKE_PORT");
  }

  const genesisHash =
    launcher.mode === "devnet"
      ? ((
          await createPublicClient({ transport: http(indexer.rpcUrl) }).getBlock({
            blockNumber: 0n,
          })
        ).hash ?? "")
      : "";
  const schema = await indexerSchemaName({ ...indexer, genesisHash });
  progress(`Starting Ponder (schema ${schema})…`);
  const ponder = startPonder({
    // The indexer needs no keys: only what it indexes with (the payout address, never the
    // payout key); no secret of the service's reaches it.
    env: indexerEnvironment({ ...childEnv, PAYOUT_ADDRESS: indexer.payoutAddress }),
    port: launcher.ponderPort,
    schema,
    onLog: (line) => console.error(`[ponder] ${redactUrlsIn(line)}`),
  });
  track("Ponder", ponder.stop, ponder.process);
  // On the devnet the backfill is a few blocks; on Base it can take a while, and the
  // service reports the indexer's progress on /api/health meanwhile.
  if (launcher.mode === "devnet") {
    progress("Waiting for Ponder's backfill…");
    await ponder.waitUntilReady();
  }
  progress("Starting the service…");

  const serviceProcess = spawn(
    process.execPath,
    [join(import.meta.dirname, "..", "api", "main.ts")],
    {
      env: childEnv,
      stdio: "inherit",
      detached: true,
    },
  );
  recordProcess(serviceProcess, "service");
  track("The service", () => waitForExit(serviceProcess, "SIGTERM"), serviceProcess);
  const apiUrl = service.http.publicUrl;
  await waitForHttp(`http://127.0.0.1:${service.http.port}/api/health`, serviceProcess);

  if (launcher.mode === "devnet") {
    const accounts = devnetAccounts();
    await writeDevnetState(launcher.devnetDirectory, {
      chainId: service.chain.chainId,
      rpcUrl: service.chain.rpcUrl,
      usdc: service.chain.usdcAddress,
      payTo: service.chain.payTo,
      payoutWallet: service.payout.address,
      apiUrl,
      ponderUrl: ponder.url,
      databaseUrl: service.databaseUrl,
      smtpIntake:
        service.mail.intake === "smtp"
          ? { host: service.mail.smtpIntake.host, port: service.mail.smtpIntake.port }
          : null,
      mailOutbox: devnetMailOutbox ?? null,
      intakeAddress: service.mail.intakeAddress ?? null,
      accounts,
    });
  }
  printSummary(launcher, {
    apiUrl,
    ponderUrl: ponder.url,
    rpcUrl: service.chain.rpcUrl,
    databaseUrl: service.databaseUrl,
    usdc: service.chain.usdcAddress,
    payTo: service.chain.payTo,
    payout: service.payout.address,
    mail:
      service.mail.intake === "smtp" && service.role !== "worker"
        ? [
            `  Mail in     smtp://${service.mail.smtpIntake.host}:${service.mail.smtpIntake.port}   (for ${service.mail.intakeAddress})`,
            ...(devnetMailOutbox
              ? [`  Mail out    ${devnetMailOutbox}   (every sent mail as .eml)`]
              : []),
          ]
        : [],
  });
}

/** The devnet mail catcher's folder (set by startDevnet). */
let devnetMailOutbox: string | undefined;

/** Starts Anvil (and PostgreSQL when DATABASE_URL is unset); returns the children's settings. */
async function startDevnet(launcher: LauncherConfig): Promise<NodeJS.ProcessEnv> {
  await assertPortFree(launcher.anvilPort, "Anvil", "ANVIL_PORT");
  if (!launcher.databaseUrl) {
    await assertPortFree(launcher.embeddedPostgresPort, "PostgreSQL", "EMBEDDED_POSTGRES_PORT");
  }

  progress(launcher.forkUrl ? "Starting Anvil (fork)…" : "Starting Anvil…");
  const anvil = await startAnvil({
    port: launcher.anvilPort,
    chainId: 8453,
    blockTimeSeconds: launcher.blockTimeSeconds,
    forkUrl: launcher.forkUrl,
  });
  track("Anvil", anvil.stop, anvil.process);
  const accounts = devnetAccounts();
  progress("Placing USDC and funding the devnet accounts…");
  await prepareDevnetChain(anvil.rpcUrl, accounts, { forked: Boolean(launcher.forkUrl) });

  let databaseUrl = launcher.databaseUrl;
  if (!databaseUrl) {
    progress("Starting the embedded PostgreSQL…");
    const server = await startEmbeddedPostgres({
      dataDirectory: resolve(launcher.devnetDirectory, "postgres"),
      port: launcher.embeddedPostgresPort,
      durable: false,
    });
    track("PostgreSQL", server.stop, server.process);
    // The devnet chain is new on every start, so its database is too: rows from the
    // previous chain would point at blocks and transactions that no longer exist.
    const admin = postgres(server.url(), { max: 1, onnotice: () => {} });
    await admin.unsafe("drop database if exists devnet with (force)");
    await admin.unsafe("create database devnet");
    await admin.end();
    databaseUrl = server.url("devnet");
  } else {
    console.error(
      "Using DATABASE_URL for the devnet: give it a database of its own, never one a Base deployment uses.",
    );
  }

  progress("Starting the mail catcher…");
  const mail = await startDevnetMail(launcher.devnetDirectory);
  track("the mail catcher", mail.catcher.stop);
  devnetMailOutbox = mail.outbox;

  return {
    ...process.env,
    ...devnetServiceEnv(accounts, { rpcUrl: anvil.rpcUrl, databaseUrl }),
    ...mail.env,
    PORT: String(launcher.servicePort),
  };
}

async function waitForHttp(url: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error("The service exited during start-up.");
    const answered = await fetch(url).then(
      () => true,
      () => false,
    );
    if (answered) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`The service did not answer on ${url} within ${timeoutMs / 1000} s.`);
}

function printSummary(
  launcher: LauncherConfig,
  urls: Record<
    "apiUrl" | "ponderUrl" | "rpcUrl" | "databaseUrl" | "usdc" | "payTo" | "payout",
    string
  > & { mail?: string[] },
): void {
  // The database's name and user are worth showing, its password and parameters are not.
  const database = urls.databaseUrl
    .replace(/\/\/([^:@/]+):[^@/]+@/, "//$1:***@")
    .replace(/\?.*$/, "");
  const lines = [
    "",
    launcher.mode === "devnet"
      ? "pay-and-earn is running on a local devnet."
      : "pay-and-earn is running against the configured chain.",
    "",
    `  Service     ${urls.apiUrl}   (health: ${urls.apiUrl}/api/health)`,
    `  Ponder      ${urls.ponderUrl}   (/ready, /status)`,
    `  Chain RPC   ${redactUrl(urls.rpcUrl)}${launcher.mode === "devnet" ? `   (Anvil, chain id 8453, a block every ${launcher.blockTimeSeconds} s)` : ""}`,
    `  PostgreSQL  ${database}`,
    `  USDC        ${urls.usdc}`,
    `  pay_to      ${urls.payTo}`,
    `  payout      ${urls.payout}`,
    ...(urls.mail ?? []),
  ];
  if (launcher.mode === "devnet") {
    lines.push(
      "",
      `  Funded test accounts and their keys: ${join(launcher.devnetDirectory, "state.json")}`,
    );
  }
  lines.push("", "  Ctrl-C stops everything.", "");
  console.log(lines.join("\n"));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    void shutdown(1, error.problems.join("\n"));
  } else {
    void shutdown(1, `Start-up failed: ${(error as Error).message}`);
  }
});
