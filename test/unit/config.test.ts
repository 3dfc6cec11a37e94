import { describe, expect, it } from "vitest";
import {
  ConfigError,
  parseIndexerConfig,
  parseLauncherConfig,
  parseServiceConfig,
} from "../../api/config.ts";

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
