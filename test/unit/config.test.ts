import { describe, expect, it } from "vitest";
import { parseIndexerConfig } from "../../api/config/indexerConfig.ts";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { ConfigError } from "../../api/config/settings.ts";
import { parseLauncherConfig } from "../../scripts/devnet/launcherConfig.ts";
import { indexerEnvironment } from "../../scripts/devnet/ponder.ts";

const valid = {
  RPC_URL: "http://127.0.0.1:8545",
  DATABASE_URL: "postgres://postgres@127.0.0.1:5432/test",
  PAY_TO: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  PAYOUT_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  RECEIPT_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  FACILITATOR_PRIVATE_KEY: `0x${"33".repeat(32)}`,
};

function problemsOf(parse: () => unknown): string[] {
  try {
    parse();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("service configuration", () => {
  it("fills defaults and checksums addresses", () => {
    const config = parseServiceConfig(valid);
    expect(config.chain.chainId).toBe(8453);
    expect(config.chain.payTo).toBe("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
    expect(config.chain.usdcAddress).toBe("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");
    expect(config.chain.confirmations).toBe(3);
    expect(config.http.publicUrl).toBe("http://localhost:3000");
    expect(config.payout.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(config.receipts.signer).not.toBe(config.payout.address);
  });

  it("gives payouts PAYOUT_RPC_URL, else RPC_URL, and checks it is an http(s) URL", () => {
    expect(parseServiceConfig(valid).chain.payoutRpcUrl).toBe(valid.RPC_URL);
    const own = parseServiceConfig({ ...valid, PAYOUT_RPC_URL: "https://payouts.example/key" });
    expect(own.chain.payoutRpcUrl).toBe("https://payouts.example/key");
    expect(own.chain.rpcUrl).toBe(valid.RPC_URL);
    expect(
      problemsOf(() => parseServiceConfig({ ...valid, PAYOUT_RPC_URL: "ws://x" })).join(),
    ).toContain("PAYOUT_RPC_URL");
  });

  it("names each broken setting on its own line", () => {
    const problems = problemsOf(() =>
      parseServiceConfig({ ...valid, PAY_TO: "nope", PORT: "eighty", CONFIRMATIONS: "-1" }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        "PAY_TO is not an address",
        "PORT is not a number",
        "CONFIRMATIONS must be at least 0",
      ]),
    );
    expect(problems).toHaveLength(3);
  });

  it("says which settings are missing; an empty value counts as missing", () => {
    const { PAYOUT_PRIVATE_KEY, ...withoutKey } = valid;
    const problems = problemsOf(() => parseServiceConfig({ ...withoutKey, PAY_TO: "" }));
    expect(problems).toEqual(
      expect.arrayContaining(["PAY_TO is required", "PAYOUT_PRIVATE_KEY is required"]),
    );
  });

  it("refuses a mixed-case address whose checksum is wrong", () => {
    const problems = problemsOf(() =>
      parseServiceConfig({ ...valid, PAY_TO: "0x70997970C51812dc3A010C7d01b50e0d17dc79c8" }),
    );
    expect(problems).toEqual(["PAY_TO is not an address"]);
  });

  it("refuses one key for payouts and receipts", () => {
    const problems = problemsOf(() =>
      parseServiceConfig({ ...valid, RECEIPT_SIGNER_PRIVATE_KEY: valid.PAYOUT_PRIVATE_KEY }),
    );
    expect(problems[0]).toMatch(/^RECEIPT_SIGNER_PRIVATE_KEY must differ/);
  });

  it("refuses a database URL that is not postgres://", () => {
    const problems = problemsOf(() =>
      parseServiceConfig({ ...valid, DATABASE_URL: "mysql://localhost/db" }),
    );
    expect(problems).toEqual(["DATABASE_URL is not a postgres:// URL"]);
  });
});

describe("x402 configuration", () => {
  it("needs a facilitator key for the in-process facilitator, not the payout key", () => {
    const { FACILITATOR_PRIVATE_KEY, ...withoutKey } = valid;
    expect(problemsOf(() => parseServiceConfig(withoutKey))[0]).toMatch(
      /^FACILITATOR_PRIVATE_KEY is required with X402_FACILITATOR=local/,
    );
    expect(
      problemsOf(() =>
        parseServiceConfig({ ...valid, FACILITATOR_PRIVATE_KEY: valid.PAYOUT_PRIVATE_KEY }),
      )[0],
    ).toMatch(/^FACILITATOR_PRIVATE_KEY must differ from PAYOUT_PRIVATE_KEY/);
  });

  it("needs a URL or CDP keys for a remote facilitator", () => {
    const remote = { ...valid, X402_FACILITATOR: "remote" };
    expect(problemsOf(() => parseServiceConfig(remote))[0]).toMatch(
      /^X402_FACILITATOR_URL is required/,
    );
    expect(
      parseServiceConfig({ ...remote, CDP_API_KEY_ID: "id", CDP_API_KEY_SECRET: "secret" }).x402
        .cdp,
    ).toEqual({ keyId: "id", keySecret: "secret" });
    expect(
      parseServiceConfig({ ...remote, X402_FACILITATOR_URL: "https://facilitator.example" }).x402
        .facilitatorUrl,
    ).toBe("https://facilitator.example");
  });
});

describe("indexer configuration", () => {
  it("derives the payout address from the key when no address is given", () => {
    const service = parseServiceConfig(valid);
    const indexer = parseIndexerConfig(valid);
    expect(indexer.payoutAddress).toBe(service.payout.address);
  });

  it("takes the node's WebSocket endpoint only as ws:// or wss://", () => {
    expect(parseIndexerConfig(valid).wsUrl).toBeUndefined();
    expect(parseIndexerConfig({ ...valid, INDEXER_WS_URL: "ws://127.0.0.1:8545" }).wsUrl).toBe(
      "ws://127.0.0.1:8545",
    );
    expect(
      problemsOf(() => parseIndexerConfig({ ...valid, INDEXER_WS_URL: "http://127.0.0.1:8545" })),
    ).toEqual(["INDEXER_WS_URL is not a ws(s) URL"]);
  });

  it("needs the payout address or its key", () => {
    const { PAYOUT_PRIVATE_KEY, ...withoutKey } = valid;
    expect(problemsOf(() => parseIndexerConfig(withoutKey))[0]).toMatch(
      /^PAYOUT_ADDRESS is required/,
    );
  });
});

describe("launcher configuration", () => {
  it("runs a devnet without RPC_URL", () => {
    expect(parseLauncherConfig({}).mode).toBe("devnet");
  });

  it("needs START_BLOCK against a real chain", () => {
    const problems = problemsOf(() => parseLauncherConfig({ RPC_URL: "https://mainnet.base.org" }));
    expect(problems[0]).toMatch(/^START_BLOCK is required/);
    expect(
      parseLauncherConfig({ RPC_URL: "https://mainnet.base.org", START_BLOCK: "1" }).mode,
    ).toBe("configured");
  });
});

describe("abuse and slow-dependency settings", () => {
  const https = { ...valid, PUBLIC_URL: "https://pay.example" };
  const token = "metrics-token-0123456789";

  it("default to small separate pools, database and server timeouts, and a 2 s read cache", () => {
    const config = parseServiceConfig(valid);
    expect(config.databasePools).toEqual({ http: 10, workers: 6, rateLimits: 2 });
    expect(config.databaseTimeouts).toEqual({
      statementMs: 15_000,
      lockMs: 5_000,
      idleInTransactionMs: 60_000,
    });
    expect(config.httpServer).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      maxConnections: 1_000,
      idleTimeoutMs: 120_000,
      connectionsPerIp: 100,
    });
    expect(config.readCacheMs).toBe(2_000);
    expect(config.warnings).toEqual([]);
  });

  it("refuse to start with PUBLIC_URL https and no METRICS_TOKEN, in one line", () => {
    expect(problemsOf(() => parseServiceConfig(https))).toEqual([
      "METRICS_TOKEN is required when PUBLIC_URL is https, or GET /metrics is open to the internet: set a random token of 16 characters or more",
    ]);
    expect(parseServiceConfig({ ...https, METRICS_TOKEN: token }).metrics.token).toBe(token);
    // A plain-http (local) deployment may leave /metrics open.
    expect(parseServiceConfig({ ...valid, PUBLIC_URL: "http://10.0.0.5:3000" }).metrics).toEqual({
      token: undefined,
    });
  });

  it("warn when PUBLIC_URL is https and TRUST_PROXY is unset; an explicit value silences it", () => {
    const warned = parseServiceConfig({ ...https, METRICS_TOKEN: token }).warnings;
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/^PUBLIC_URL is https but TRUST_PROXY is unset/);
    for (const TRUST_PROXY of ["false", "1", "10.0.0.0/8"]) {
      expect(parseServiceConfig({ ...https, METRICS_TOKEN: token, TRUST_PROXY }).warnings).toEqual(
        [],
      );
    }
    expect(parseServiceConfig(valid).trustProxy).toBe(false);
  });

  it("refuse broken values and a headers timeout longer than the request timeout", () => {
    expect(
      problemsOf(() =>
        parseServiceConfig({
          ...valid,
          DATABASE_POOL_HTTP: "0",
          DATABASE_STATEMENT_TIMEOUT_MS: "soon",
          HTTP_MAX_CONNECTIONS: "-1",
        }),
      ),
    ).toEqual([
      "DATABASE_POOL_HTTP must be at least 1",
      "DATABASE_STATEMENT_TIMEOUT_MS is not a number",
      "HTTP_MAX_CONNECTIONS must be at least 1",
    ]);
    expect(
      problemsOf(() =>
        parseServiceConfig({
          ...valid,
          HTTP_HEADERS_TIMEOUT_MS: "60000",
          HTTP_REQUEST_TIMEOUT_MS: "30000",
        }),
      ),
    ).toEqual([
      "HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)",
    ]);
    // 0 turns a database timeout off.
    expect(
      parseServiceConfig({ ...valid, DATABASE_LOCK_TIMEOUT_MS: "0" }).databaseTimeouts.lockMs,
    ).toBe(0);
  });
});

describe("Ponder's environment", () => {
  it("holds what the indexer needs and none of the service's keys and secrets", () => {
    const env = {
      ...valid,
      PATH: "/usr/bin",
      HOME: "/root",
      PAYOUT_ADDRESS: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
      START_BLOCK: "7",
      INDEXER_WS_URL: "wss://base.example/ws",
      PONDER_LOG_LEVEL: "warn",
      PORT: "3000",
      CDP_API_KEY_ID: "cdp-id",
      CDP_API_KEY_SECRET: "cdp-secret",
      METRICS_TOKEN: "metrics-token-0123456789",
      SMTP_PASSWORD: "smtp",
      SOME_FUTURE_SECRET: "x",
    };
    const picked = indexerEnvironment(env);
    expect(Object.keys(picked).sort()).toEqual(
      [
        "CHAIN_ID",
        "DATABASE_URL",
        "HOME",
        "INDEXER_WS_URL",
        "PATH",
        "PAYOUT_ADDRESS",
        "PAY_TO",
        "PONDER_LOG_LEVEL",
        "RPC_URL",
        "START_BLOCK",
      ].filter((key) => key in env),
    );
    // What Ponder reads to index still parses from it.
    expect(parseIndexerConfig(picked).payoutAddress).toBe(env.PAYOUT_ADDRESS);
  });
});
