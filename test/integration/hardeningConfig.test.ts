import { describe, expect, it } from "vitest";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { ConfigError } from "../../api/config/settings.ts";
import type { SurfaceContext } from "../../api/core/surfaceContext.ts";
import { createLogger } from "../../api/logger.ts";
import { createApp } from "../../api/web/app.ts";

/** The settings of the HTTP hardening, health thresholds and metrics, as parsed at start. */

const valid = {
  RPC_URL: "http://127.0.0.1:8545",
  DATABASE_URL: "postgres://postgres@127.0.0.1:5432/test",
  PAY_TO: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  PAYOUT_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  RECEIPT_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  FACILITATOR_PRIVATE_KEY: `0x${"33".repeat(32)}`,
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    parseServiceConfig({ ...valid, ...env });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe("hardening settings", () => {
  it("default to no trusted proxy, limits on, public metrics", () => {
    const config = parseServiceConfig(valid);
    expect(config.trustProxy).toBe(false);
    expect(config.rateLimits).toEqual({
      enabled: true,
      windowSeconds: 60,
      reads: 600,
      writes: 60,
      countTimeoutMs: 500,
    });
    expect(config.metrics).toEqual({ token: undefined });
    expect(config.health).toEqual({ matcherBacklogSeconds: 60, payoutBacklogSeconds: 120 });
  });

  it.each([
    ["1", 1],
    ["false", false],
    ["loopback", ["loopback"]],
    ["10.0.0.0/8, 192.168.1.7,loopback", ["10.0.0.0/8", "192.168.1.7", "loopback"]],
    ["fd00::/8", ["fd00::/8"]],
  ])("read TRUST_PROXY=%s", (value, expected) => {
    expect(parseServiceConfig({ ...valid, TRUST_PROXY: value }).trustProxy).toEqual(expected);
  });

  it("refuse what would trust any client's X-Forwarded-For, and broken values", () => {
    expect(problemsOf({ TRUST_PROXY: "true" })).toEqual([
      expect.stringMatching(/^TRUST_PROXY must be false, the number of proxies/),
    ]);
    expect(problemsOf({ TRUST_PROXY: "anything" })).toHaveLength(1);
    expect(problemsOf({ RATE_LIMIT_ENABLED: "no" })).toEqual([
      "RATE_LIMIT_ENABLED must be true or false",
    ]);
    expect(problemsOf({ RATE_LIMIT_WRITES: "0" })).toEqual([
      "RATE_LIMIT_WRITES must be at least 1",
    ]);
    expect(problemsOf({ METRICS_TOKEN: "short" })).toEqual([
      "METRICS_TOKEN must be at least 16 characters",
    ]);
    expect(problemsOf({ HEALTH_PAYOUT_BACKLOG_SECONDS: "soon" })).toEqual([
      "HEALTH_PAYOUT_BACKLOG_SECONDS is not a number",
    ]);
  });

  it("an address the regex lets through but Express cannot use stops the app from being built", () => {
    const config = parseServiceConfig({ ...valid, TRUST_PROXY: "999.1.1.1" });
    const deps = { config, logger: createLogger("silent") } as unknown as SurfaceContext;
    expect(() => createApp([], deps)).toThrow(/^TRUST_PROXY is not valid: .*999\.1\.1\.1/);
  });
});
