import { Writable } from "node:stream";
import { HttpRequestError } from "viem";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../api/logger.ts";
import { redactUrl, redactUrlsIn } from "../../api/redaction.ts";

/** Secrets never reach a log line: URLs lose credentials, path and query; secret keys go. */

const RPC_KEY = "rpc-provider-key-7f3a9c";
const RPC_URL = `https://user:hunter2@base-mainnet.example.com/v2/${RPC_KEY}?apikey=q-${RPC_KEY}`;

function capture() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  return { logger: createLogger("debug", "test", sink), lines };
}

describe("redactUrl", () => {
  it.each([
    [RPC_URL, "https://base-mainnet.example.com/…"],
    ["https://rpc.example/?key=abc", "https://rpc.example/…"],
    ["http://127.0.0.1:8545", "http://127.0.0.1:8545"],
    ["http://127.0.0.1:8545/", "http://127.0.0.1:8545"],
    ["postgres://app:s3cret@db.internal:5432/pay", "postgres://db.internal:5432/…"],
    ["wss://base.example/ws/KEY#frag", "wss://base.example/…"],
  ])("%s → %s", (url, redacted) => {
    expect(redactUrl(url)).toBe(redacted);
  });

  it("finds URLs inside text", () => {
    expect(redactUrlsIn(`HTTP request failed.\nURL: ${RPC_URL}\nRequest body: {}`)).toBe(
      "HTTP request failed.\nURL: https://base-mainnet.example.com/…\nRequest body: {}",
    );
  });
});

describe("the logger", () => {
  it("redacts a viem error's URL in its message, fields, stack and cause, however deep", () => {
    const { logger, lines } = capture();
    const error = new HttpRequestError({ url: RPC_URL, status: 401, body: { method: "eth_call" } });
    const wrapped = new Error(`tick failed against ${RPC_URL}`, { cause: error });
    logger.error({ err: wrapped }, "tick failed");
    logger.error(error);
    logger.warn({ yoga: [{ nested: { deeper: [error] } }] }, "graphql");
    logger.info({ rpc: RPC_URL }, `using ${RPC_URL}`);
    logger.info("printf style %s", RPC_URL);
    expect(lines).toHaveLength(5);
    for (const line of lines) {
      expect(line).not.toContain(RPC_KEY);
      expect(line).not.toContain("hunter2");
      expect(line).toContain("base-mainnet.example.com/…");
    }
    // What is left is still useful: the error's kind and status.
    expect(JSON.parse(lines[1] as string).err).toMatchObject({ type: "HttpRequestError" });
    expect(lines[1]).toContain("401");
  });

  it("replaces values under secret-looking keys at any depth", () => {
    const { logger, lines } = capture();
    const secret = `0x${"ab".repeat(32)}`;
    logger.info(
      {
        privateKey: secret,
        config: {
          x402: { cdp: { keyId: "id", keySecret: secret } },
          payout: { private_key: secret },
        },
        headers: { authorization: `Bearer ${secret}` },
        list: [{ apiKey: secret }, { rawTransaction: secret }],
        metrics: { token: secret },
      },
      "settings",
    );
    expect(lines[0]).not.toContain(secret);
    expect(JSON.parse(lines[0] as string).config.x402.cdp).toEqual({
      keyId: "id",
      keySecret: "[redacted]",
    });
  });

  it("survives cycles and keeps plain values", () => {
    const { logger, lines } = capture();
    const looped: Record<string, unknown> = { claim_id: "clm_x", amount: 10n, at: new Date(0) };
    looped.self = looped;
    logger.info({ looped }, "looped");
    expect(JSON.parse(lines[0] as string).looped).toMatchObject({
      claim_id: "clm_x",
      amount: "10",
      self: "[circular]",
    });
  });

  it("still replaces secret keys once it has seen more distinct keys than it remembers", () => {
    const { logger, lines } = capture();
    // A client's object with thousands of keys of its own, logged before the secrets are.
    const junk = Object.fromEntries(
      Array.from({ length: 3_000 }, (_, index) => [`field_${index}`, index]),
    );
    logger.info({ junk }, "a client's body");
    const secret = `0x${"cd".repeat(32)}`;
    logger.info({ late: { passwordHash: secret, metricsToken: secret, ok: "kept" } }, "late");
    expect(lines[1]).not.toContain(secret);
    expect(JSON.parse(lines[1] as string).late).toEqual({
      passwordHash: "[redacted]",
      metricsToken: "[redacted]",
      ok: "kept",
    });
  });

  it("redacts a URL at the very end of a string, and leaves a string without one as it was", () => {
    const { logger, lines } = capture();
    logger.info({ path: `/api/claims/x/${RPC_URL}`, plain: "no url: here // or there" }, "paths");
    const line = JSON.parse(lines[0] as string);
    expect(line.path).toBe("/api/claims/x/https://base-mainnet.example.com/…");
    expect(line.plain).toBe("no url: here // or there");
  });
});
