import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import type { PaymentRequirements } from "@x402/core/types";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountWithRole } from "../../scripts/devnet/accounts.ts";
import { devnetServiceEnv } from "../../scripts/devnet/devnetServiceEnv.ts";
import { waitForExit } from "../../scripts/devnet/processes.ts";
import { recordProcess } from "../../scripts/devnet/processRecords.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { freePort } from "../support/ports.ts";
import { commandOf, descendantsOf, environmentOf } from "../support/processTree.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpcProxy.ts";
import { testServiceEnv } from "../support/service.ts";
import { startServiceProcess } from "../support/serviceProcess.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * The service and `npm start` run with fake secrets everywhere a deployment has real ones: an
 * RPC URL with a provider key in its path and query and credentials, a database password, CDP
 * API keys, a metrics token, and the keys. An RPC failure makes viem errors (which carry the
 * URL) reach the log. Every line either process prints is searched for every secret; Ponder's
 * environment is read from /proc.
 */

const FAKE = {
  rpcPathKey: "fake-rpc-path-key-4c1d2e",
  rpcQueryKey: "fake-rpc-query-key-9b8a7f",
  rpcUser: "fake-rpc-user-5e6f",
  rpcPassword: "fake-rpc-password-3a2b",
  databasePassword: "fake-db-password-66dd",
  cdpKeyId: "fake-cdp-key-id-77aa",
  cdpSecret: "fake-cdp-secret-11bb22cc",
  metricsToken: "fake-metrics-token-0123456789",
};

let setup: ChainWithDatabase;
let launcherDatabase: TestDatabase;
let proxy: RpcProxy;
let secretRpcUrl: string;
let keys: string[];

beforeAll(async () => {
  [setup, launcherDatabase] = await Promise.all([startChainWithDatabase(), createTestDatabase()]);
  proxy = await startRpcProxy(setup.chain.rpcUrl);
  secretRpcUrl = `http://${FAKE.rpcUser}:${FAKE.rpcPassword}@127.0.0.1:${proxy.port}/v3/${FAKE.rpcPathKey}?apikey=${FAKE.rpcQueryKey}`;
  keys = (["payout", "receipt_signer", "facilitator"] as const).map(
    (role) => accountWithRole(setup.chain.accounts, role).privateKey,
  );
});

afterAll(async () => {
  await proxy?.stop();
  await launcherDatabase?.drop();
  await setup?.stop();
});

/** Every secret of the run: the fake ones, and the keys (with and without 0x). */
function secrets(): string[] {
  return [...Object.values(FAKE), ...keys, ...keys.map((key) => key.slice(2))];
}

/** Each line that shows a secret, with the secret it shows. */
function leaks(output: string): string[] {
  const found: string[] = [];
  for (const line of output.split("\n")) {
    for (const secret of secrets()) {
      if (line.includes(secret)) found.push(`${secret} in: ${line.slice(0, 400)}`);
    }
  }
  return found;
}

function withPassword(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.password = FAKE.databasePassword;
  return url.toString();
}

const secretSettings = () => ({
  CDP_API_KEY_ID: FAKE.cdpKeyId,
  CDP_API_KEY_SECRET: FAKE.cdpSecret,
  METRICS_TOKEN: FAKE.metricsToken,
});

/**
 * With the RPC failing, an x402 payment makes the facilitator's readiness check fail: a viem
 * HttpRequestError, whose message and fields carry the RPC URL, is logged.
 */
async function logAnRpcFailure(baseUrl: string) {
  const url = `${baseUrl}/api/x402/earn`;
  const payer = privateKeyToAccount(setup.chain.user(0).privateKey);
  // Right after the launcher says it runs, the service may still answer 503 until its
  // facilitator has said what it supports; this test is about what is printed, not that wait.
  const terms = await waitFor(
    () => paymentTerms(url, { payout_address: payer.address }).catch(() => undefined),
    { what: "the x402 route to answer 402" },
  );
  const header = await handSignedPayment(payer, terms.accepts[0] as PaymentRequirements);
  proxy.setMode("fail");
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "payment-signature": header },
      body: JSON.stringify({ payout_address: payer.address }),
    });
    expect(response.status).toBe(503);
    // And the metrics, with their token.
    const metrics = await fetch(`${baseUrl}/metrics`, {
      headers: { authorization: `Bearer ${FAKE.metricsToken}` },
    });
    expect(metrics.status).toBe(200);
  } finally {
    proxy.setMode("pass");
  }
}

describe("secrets in output", () => {
  it("the service logs none, not even in the RPC errors it logs (debug level)", async () => {
    const port = await freePort();
    const service = startServiceProcess(
      testServiceEnv({ ...setup.chain, rpcUrl: secretRpcUrl }, withPassword(setup.database.url), {
        ...secretSettings(),
        LOG_LEVEL: "debug",
        PORT: String(port),
      }),
    );
    try {
      const baseUrl = `http://127.0.0.1:${port}`;
      // A service process's start took over 60 s in a whole run on a slow 2-core VM.
      await waitFor(() => fetch(`${baseUrl}/api/health`).then((response) => response.ok), {
        timeoutMs: 150_000,
        what: `the service to answer. Output:\n${service.output()}`,
      });
      await logAnRpcFailure(baseUrl);
      await waitFor(() => service.fullOutput().includes("x402 verify could not be done"), {
        what: "the RPC failure to be logged",
      });
    } finally {
      await service.stop();
    }
    const output = service.fullOutput();
    expect(leaks(output)).toEqual([]);
    // The failure was logged, with the RPC named as far as it is harmless.
    const logged = output
      .split("\n")
      .find((line) => line.includes("x402 verify could not be done"));
    expect(logged).toContain("HttpRequestError");
    expect(logged).toContain(`http://127.0.0.1:${proxy.port}/…`);
  }, 240_000);

  it("npm start prints none, and Ponder's environment holds none it does not need", {
    timeout: 150_000,
  }, async () => {
    const [port, ponderPort] = [await freePort(), await freePort()];
    const env = {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      ...devnetServiceEnv(setup.chain.accounts, {
        rpcUrl: secretRpcUrl,
        databaseUrl: withPassword(launcherDatabase.url),
      }),
      ...secretSettings(),
      PORT: String(port),
      PONDER_PORT: String(ponderPort),
      LOG_LEVEL: "info",
    };
    const launcher: ChildProcess = spawn(
      process.execPath,
      [join(import.meta.dirname, "..", "..", "scripts", "start.ts")],
      { env, stdio: ["ignore", "pipe", "pipe"] },
    );
    recordProcess(launcher, "npm start");
    let output = "";
    launcher.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    launcher.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    try {
      await waitFor(() => output.includes("Ctrl-C stops everything"), {
        timeoutMs: 100_000,
        what: `npm start to report it is running. Output so far:\n${output}`,
      });
      expect(output).toContain(`Chain RPC   http://127.0.0.1:${proxy.port}/…`);
      expect(output).toMatch(
        /PostgreSQL {2}postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/test_\w+\n/,
      );

      const ponder = descendantsOf(launcher.pid as number).find((pid) =>
        commandOf(pid).includes("ponder.js start"),
      );
      expect(ponder).toBeDefined();
      const ponderEnv = environmentOf(ponder as number);
      for (const key of [
        "PAYOUT_PRIVATE_KEY",
        "RECEIPT_SIGNER_PRIVATE_KEY",
        "FACILITATOR_PRIVATE_KEY",
        "CDP_API_KEY_ID",
        "CDP_API_KEY_SECRET",
        "METRICS_TOKEN",
        "PORT",
      ]) {
        expect(ponderEnv, key).not.toHaveProperty(key);
      }
      // Ponder needs the node's URLs (HTTP and WebSocket, with the same key) and the
      // database; nothing else secret.
      const others = Object.entries(ponderEnv)
        .filter(([key]) => !["RPC_URL", "INDEXER_WS_URL", "DATABASE_URL"].includes(key))
        .map(([key, value]) => `${key}=${value}`)
        .join("\n");
      expect(leaks(others)).toEqual([]);

      await logAnRpcFailure(`http://127.0.0.1:${port}`);
      await waitFor(() => output.includes("x402 verify could not be done"), {
        what: "the RPC failure to be logged",
      });
    } finally {
      if (launcher.exitCode === null) await waitForExit(launcher, "SIGTERM", 30_000);
    }
    expect(leaks(output)).toEqual([]);
  });

  it("the service refuses PUBLIC_URL https without METRICS_TOKEN, in one line", async () => {
    const service = startServiceProcess(
      testServiceEnv(setup.chain, setup.database.url, { PUBLIC_URL: "https://pay.example" }),
    );
    expect((await service.exited).code).toBe(1);
    expect(service.fullOutput().trim()).toBe(
      "METRICS_TOKEN is required when PUBLIC_URL is https, or GET /metrics is open to the internet: set a random token of 16 characters or more",
    );
  });
});
