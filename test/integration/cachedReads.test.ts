import { request as httpRequest } from "node:http";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../api/db/connect.ts";
import { graphqlRoutes } from "../../api/graphql/graphqlRoutes.ts";
import { pageRoutes } from "../../api/pages/pageRoutes.ts";
import type { RunningService } from "../../api/service.ts";
import { completeClaims, createClaim } from "../support/completedClaims.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpcProxy.ts";
import { startTestService } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { startTestApp } from "../support/testApp.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The expensive public reads are shared for READ_CACHE_MS (2 s by default) by every caller and
 * every surface: health and metrics (RPC calls and queries), the ledger's totals and GraphQL
 * stats (aggregates over every completed claim), refreshed as soon as a claim completes. The
 * aggregates are also weighed in GraphQL's cost limit; text answers are compressed.
 */

const DEFAULT_CACHE_MS = 2_000;
let stack: Stack;
let proxy: RpcProxy;
/** An `api` replica whose RPC goes through the counting proxy (no workers: only requests call it). */
let reader: RunningService;
/** RPC calls of one health check, measured cold. */
let perCheck = 0;
/** The claims completed for this file (their receipts are genuine). */
let completed: Awaited<ReturnType<typeof completeClaims>>;

beforeAll(async () => {
  // The stack's service keeps its reads a minute: only the completion NOTIFY can refresh them.
  // Public reads go through one proxy (RPC_URL), payouts through another (PAYOUT_RPC_URL).
  stack = await startStack({
    rpcProxy: true,
    payoutRpcProxy: true,
    serviceEnv: { READ_CACHE_MS: "60000" },
  });
  proxy = await startRpcProxy(stack.chain.rpcUrl);
  reader = await startTestService({ ...stack.chain, rpcUrl: proxy.url }, stack.database.url, {
    ROLE: "api",
  });
  completed = await completeClaims(stack, [
    { agentName: "cached-one" },
    { agentName: "cached-two" },
  ]);
});

afterAll(async () => {
  await reader?.stop();
  await proxy?.stop();
  await stack?.stop();
});

/** `count` requests, `parallel` at a time; returns the milliseconds they took. */
async function burst(count: number, parallel: number, send: () => Promise<unknown>) {
  const started = Date.now();
  for (let done = 0; done < count; done += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - done) }, send));
  }
  return Date.now() - started;
}

/** A transaction hash no chain knows. */
const randomHash = () =>
  `0x${Array.from(crypto.getRandomValues(new Uint8Array(32)), (byte) =>
    byte.toString(16).padStart(2, "0"),
  ).join("")}`;

/** The most refreshes a cache of `ttlMs` can make in `elapsedMs`. */
const refreshesIn = (elapsedMs: number, ttlMs = DEFAULT_CACHE_MS) =>
  Math.floor(elapsedMs / ttlMs) + 1;

/**
 * The pool's tagged-template calls, counted when their text aggregates the ledger: what a test
 * can count without pg_stat_statements (which the test server does not load).
 */
function countingAggregates(sql: Database) {
  const counts = { totals: 0, daily: 0 };
  const counting = new Proxy(sql, {
    apply(target, self, args: unknown[]) {
      const strings = args[0] as TemplateStringsArray | undefined;
      const text = Array.isArray(strings) ? strings.join("?") : "";
      if (text.includes("app.ledger_days")) {
        if (text.includes("generate_series")) counts.daily += 1;
        else counts.totals += 1;
      }
      return Reflect.apply(target, self, args);
    },
  });
  return { sql: counting, counts };
}

async function graphql(baseUrl: string, query: string) {
  const response = await fetch(`${baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ query }),
  });
  const text = await response.text();
  return {
    status: response.status,
    text,
    ...(JSON.parse(text) as {
      data?: Record<string, unknown> | null;
      errors?: { message: string; extensions?: Record<string, unknown> }[];
    }),
  };
}

describe("RPC-backed public reads (receipt verification, payment lookups)", () => {
  it("verify a genuine receipt 100 times for a bounded number of RPC calls, not 4 each", async () => {
    const claim = completed[0];
    if (!claim) throw new Error("no completed claim");
    const receipt = await stack.api<{ message: string; signature: string }>(
      `/api/claims/${claim.claimId}/receipt`,
    );
    const body = { message: receipt.body.message, signature: receipt.body.signature };
    const verify = async () => {
      const response = await fetch(`${reader.url}/api/receipts/verify`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { chain?: { payment?: { state: string } } };
    };
    expect((await verify()).chain?.payment?.state).toBe("on_chain");
    proxy.reset();
    const elapsed = await burst(100, 10, verify);
    // Per TTL: the two receipts and the head, once each.
    expect(proxy.count()).toBeLessThanOrEqual(3 * refreshesIn(elapsed));
    expect(proxy.count()).toBeLessThan(100);
  });

  it("look up unknown transactions with at most PUBLIC_RPC_READS_MAX_CONCURRENT RPC calls at once; the rest 503 at once", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Receipts wait until the test lets them go: the requests holding a slot stay in flight.
    proxy.rule = (call) =>
      call.method === "eth_getTransactionReceipt"
        ? { kind: "hold", until: held }
        : { kind: "pass" };
    proxy.reset();
    const refused: { retryAfter: string | null; type?: string }[] = [];
    try {
      const lookups = Array.from({ length: 30 }, async () => {
        const response = await fetch(`${reader.url}/api/payments/${randomHash()}`, {
          headers: { accept: "application/json" },
        });
        const body = (await response.json()) as { type?: string };
        if (response.status === 503) {
          refused.push({ retryAfter: response.headers.get("retry-after"), type: body.type });
        }
        return response.status;
      });
      // 4 slots by default: 4 receipts asked for, every other lookup refused without waiting.
      await waitFor(async () => (refused.length >= 26 ? true : undefined), {
        what: "the lookups beyond the cap to be refused",
      });
      expect(proxy.count("eth_getTransactionReceipt")).toBeLessThanOrEqual(4);
      expect(refused[0]).toMatchObject({
        retryAfter: "1",
        type: expect.stringContaining("temporarily_unavailable"),
      });
      release();
      const statuses = await Promise.all(lookups);
      expect(statuses.filter((status) => status === 404)).toHaveLength(30 - refused.length);
    } finally {
      release();
      proxy.rule = () => ({ kind: "pass" });
    }
  });
});

describe("PAYOUT_RPC_URL: the payouts' own RPC", () => {
  /** The calls a proxy saw that name `text` anywhere in their parameters (hash, address, topic). */
  const naming = (proxy: RpcProxy, text: string) =>
    proxy.calls.filter((call) =>
      JSON.stringify(call.params).toLowerCase().includes(text.toLowerCase().replace(/^0x/, "")),
    );

  function rpcs() {
    const { rpcProxy: publicRpc, payoutRpcProxy: payoutRpc } = stack;
    if (!publicRpc || !payoutRpc) throw new Error("the stack runs without its two RPC proxies");
    return { publicRpc, payoutRpc };
  }

  it("signs, broadcasts and confirms payouts through it; public reads never reach it", async () => {
    const { publicRpc, payoutRpc } = rpcs();
    const wallet = stack.chain.payout.address;
    publicRpc.reset();
    payoutRpc.reset();
    const [claim] = await completeClaims(stack, [{ agentName: "own-rpc" }]);
    if (!claim) throw new Error("no completed claim");
    // Funding and nonce (sign), the raw transaction (broadcast), the wallet's logs (confirm).
    expect(payoutRpc.count("eth_sendRawTransaction")).toBeGreaterThan(0);
    expect(naming(payoutRpc, wallet).map((call) => call.method)).toEqual(
      expect.arrayContaining(["eth_getTransactionCount", "eth_getLogs"]),
    );
    expect(publicRpc.count("eth_sendRawTransaction")).toBe(0);
    expect(naming(publicRpc, wallet)).toEqual([]);

    // What strangers can ask that reads the chain: payments, receipts, health.
    payoutRpc.reset();
    publicRpc.reset();
    const unknown = randomHash();
    const receipt = await stack.api<{ message: string; signature: string }>(
      `/api/claims/${claim.claimId}/receipt`,
    );
    const answers = await Promise.all([
      stack.api(`/api/payments/${claim.paymentTx}`),
      stack.api(`/api/payments/${unknown}`),
      stack.api("/api/receipts/verify", {
        body: { message: receipt.body.message, signature: receipt.body.signature },
      }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 404, 200]);
    for (const hash of [claim.paymentTx, unknown]) {
      expect(naming(publicRpc, hash).length).toBeGreaterThan(0);
      expect(naming(payoutRpc, hash)).toEqual([]);
    }
    expect(naming(payoutRpc, claim.payoutTx)).toEqual([]);
  });

  it("pays out while a flood of public reads holds every call to the public RPC", async () => {
    const { publicRpc, payoutRpc } = rpcs();
    let releaseBroadcast = () => {};
    const broadcastHeld = new Promise<void>((resolve) => {
      releaseBroadcast = resolve;
    });
    let endFlood = () => {};
    const floodOver = new Promise<void>((resolve) => {
      endFlood = resolve;
    });
    // The payout waits, signed, at the broadcast until the public RPC is flooded.
    payoutRpc.rule = (call) =>
      call.method === "eth_sendRawTransaction"
        ? { kind: "hold", until: broadcastHeld }
        : { kind: "pass" };
    const flood: Promise<number>[] = [];
    try {
      payoutRpc.reset();
      const claim = await createClaim(stack, { agentName: "flooded" });
      await stack.chain.transferUsdc(
        stack.chain.user(3),
        stack.chain.payTo.address,
        atomic(claim.amountDueUsdc),
      );
      await stack.mine(2);
      await waitFor(() => payoutRpc.count("eth_sendRawTransaction") > 0, {
        what: "the payout to reach PAYOUT_RPC_URL's broadcast",
      });

      // The flood: the public RPC answers nothing any more, and strangers keep asking.
      publicRpc.reset();
      publicRpc.rule = () => ({ kind: "hold", until: floodOver });
      for (let index = 0; index < 100; index += 1) {
        flood.push(
          fetch(`${stack.service.url}/api/payments/${randomHash()}`, {
            headers: { accept: "application/json" },
          }).then(async (response) => {
            await response.arrayBuffer();
            return response.status;
          }),
        );
      }
      await waitFor(() => publicRpc.count() > 0, { what: "the flood to reach the public RPC" });
      releaseBroadcast();
      const started = Date.now();
      await stack.untilClaimStatus(claim.claimId, "completed");
      const payoutMs = Date.now() - started;
      // Still flooded: the public RPC has answered nothing since the flood began.
      expect(publicRpc.count()).toBeGreaterThan(0);
      expect(payoutRpc.count("eth_sendRawTransaction")).toBeGreaterThan(0);
      expect(payoutMs).toBeLessThan(15_000);
    } finally {
      releaseBroadcast();
      endFlood();
      payoutRpc.rule = () => ({ kind: "pass" });
      publicRpc.rule = () => ({ kind: "pass" });
    }
    // The flood's lookups end too: 404 once the RPC answers, 503 beyond the concurrent cap.
    const statuses = await Promise.all(flood);
    expect(statuses.every((status) => status === 404 || status === 503)).toBe(true);
  });
});

describe("GET /api/health and GET /metrics", () => {
  it("make a bounded number of RPC calls per 100 health requests, not ~7 each", async () => {
    // Cold: one health check's worth of RPC calls.
    await fetch(`${reader.url}/api/health`);
    perCheck = proxy.count();
    expect(perCheck).toBeGreaterThan(0);

    proxy.reset();
    const elapsed = await burst(100, 10, async () => {
      const response = await fetch(`${reader.url}/api/health`);
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    });
    const calls = proxy.count();
    expect(calls).toBeLessThanOrEqual(perCheck * refreshesIn(elapsed));
    expect(calls).toBeLessThan(100);
  });

  it("share one snapshot: 50 scrapes and 50 health checks cost one check's RPC calls per TTL", async () => {
    await fetch(`${reader.url}/api/health`);
    proxy.reset();
    let turn = 0;
    const elapsed = await burst(100, 10, async () => {
      turn += 1;
      const response = await fetch(`${reader.url}/${turn % 2 ? "metrics" : "api/health"}`);
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    });
    // Without the shared snapshot, scrapes and checks would each refresh on their own clock.
    expect(proxy.count()).toBeLessThanOrEqual(perCheck * refreshesIn(elapsed));
    expect(proxy.count()).toBeLessThan(100);
  });
});

/** `stats.completedPayouts` of a GraphQL answer (the query must ask for it). */
function completedPayouts(answer: Awaited<ReturnType<typeof graphql>>): number {
  const stats = answer.data?.stats as { completedPayouts?: number } | undefined;
  if (typeof stats?.completedPayouts !== "number") throw new Error(answer.text);
  return stats.completedPayouts;
}

describe("ledger totals and GraphQL stats", () => {
  it("are one aggregate per TTL for 100 requests, whatever the surface and the aliases", async () => {
    const { sql, counts } = countingAggregates(stack.service.sql);
    const app = await startTestApp({
      sql,
      config: stack.service.config,
      routers: (context) => [graphqlRoutes(context), pageRoutes(context)],
    });
    try {
      const aliases = Array.from({ length: 10 }, (_, i) => `s${i}: stats { completedPayouts }`);
      const elapsed = await burst(100, 10, async () => {
        const [page, stats, aliased] = await Promise.all([
          fetch(`${app.url}/ledger`),
          graphql(app.url, "{ stats { completedPayouts usdcPaidOut } }"),
          graphql(app.url, `{ ${aliases.join(" ")} }`),
        ]);
        expect(page.status).toBe(200);
        await page.arrayBuffer();
        expect(stats.errors, stats.text).toBeUndefined();
        expect(aliased.errors, aliased.text).toBeUndefined();
      });
      // 300 requests, 1,200 totals asked for: one aggregate (the cache holds a minute here).
      expect(elapsed).toBeLessThan(60_000);
      expect(counts.totals).toBe(1);

      for (let index = 0; index < 20; index++) {
        const answer = await graphql(app.url, "{ stats { daily(days: 366) { day } } }");
        expect(answer.errors, answer.text).toBeUndefined();
      }
      expect(counts.daily).toBe(1);
    } finally {
      await app.stop();
    }
  });

  it("show a new completion at once, though they are cached", async () => {
    const before = await graphql(stack.service.url, "{ stats { completedPayouts } }");
    const counted = completedPayouts(before);
    // A query of the ledger alone is answered from a kept answer (api/graphql/ledgerAnswers.ts).
    const newest = "{ ledger(first: 1) { edges { node { agentName } } } }";
    const newestAgent = async (url: string) => {
      const answer = await graphql(url, newest);
      const ledger = answer.data?.ledger as { edges: { node: { agentName: string } }[] };
      return ledger.edges[0]?.node.agentName;
    };
    expect(await newestAgent(stack.service.url)).not.toBe("cached-three");
    expect(await newestAgent(stack.service.url)).not.toBe("cached-three");
    expect(await newestAgent(reader.url)).not.toBe("cached-three");
    const page = await (await fetch(`${stack.service.url}/ledger`)).text();
    expect(page).toContain(`<strong>${counted}</strong><span>completed payouts</span>`);

    await completeClaims(stack, [{ agentName: "cached-three" }]);
    // The service's cache holds a minute; the completion's NOTIFY refreshes it in milliseconds.
    await waitFor(
      async () => {
        const after = await graphql(stack.service.url, "{ stats { completedPayouts } }");
        return completedPayouts(after) === counted + 1;
      },
      { timeoutMs: 10_000, what: "stats to count the new completion" },
    );
    expect(await newestAgent(stack.service.url)).toBe("cached-three");
    const refreshed = await (await fetch(`${stack.service.url}/ledger`)).text();
    expect(refreshed).toContain(`<strong>${counted + 1}</strong><span>completed payouts</span>`);
    // The other replica heard it too.
    const replica = await graphql(reader.url, "{ stats { completedPayouts } }");
    expect(completedPayouts(replica)).toBe(counted + 1);
    expect(await newestAgent(reader.url)).toBe("cached-three");
  });

  it.each([
    [
      "two long daily series",
      "{ a: stats { daily(days: 366) { day } } b: stats { daily(days: 365) { day } } }",
    ],
    [
      "one fragment spread under two aliases",
      "fragment D on Stats { daily(days: 300) { day } } { a: stats { ...D } b: stats { ...D } }",
    ],
    [
      "ten daily series under ten aliases",
      `{ stats { ${Array.from({ length: 10 }, (_, i) => `d${i}: daily(days: ${40 + i}) { day }`).join(" ")} } }`,
    ],
  ])("are weighed in the cost limit: %s is refused before it runs", async (_, query) => {
    const answer = await graphql(stack.service.url, query);
    expect(answer.data ?? null).toBeNull();
    expect(answer.errors?.[0]?.message, answer.text).toMatch(
      /aggregate cost limit of 1000 exceeded/,
    );
    expect(answer.errors?.[0]?.extensions).toMatchObject({ code: "QUERY_TOO_EXPENSIVE" });
  });

  it.each([
    ["the longest series", "{ stats { completedPayouts daily(days: 366) { day } } }"],
    [
      "days from a variable (weighed at 366)",
      "query ($d: Int) { stats { daily(days: $d) { day } } }",
    ],
    [
      "ten plain stats under aliases",
      `{ ${Array.from({ length: 10 }, (_, i) => `s${i}: stats { completedPayouts }`).join(" ")} }`,
    ],
  ])("let %s through", async (_, query) => {
    const answer = await graphql(stack.service.url, query);
    expect(answer.errors, answer.text).toBeUndefined();
  });
});

describe("compression", () => {
  /** The raw bytes as sent (fetch would decompress them). */
  function rawGet(url: string, headers: Record<string, string>) {
    return new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const request = httpRequest(url, { headers }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({ headers: response.headers, body: Buffer.concat(chunks) }),
        );
        response.on("error", reject);
      });
      request.on("error", reject);
      request.end();
    });
  }

  it("sends GraphiQL gzipped to a browser that accepts it: a fraction of its size", async () => {
    const url = `${stack.service.url}/graphql`;
    const plain = await rawGet(url, { accept: "text/html", "accept-encoding": "identity" });
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.body.length).toBeGreaterThan(1_000_000);

    const gzipped = await rawGet(url, {
      accept: "text/html,application/xhtml+xml",
      "accept-encoding": "gzip, deflate, br",
    });
    expect(gzipped.headers["content-encoding"]).toBe("gzip");
    expect(gzipped.headers.vary).toMatch(/accept-encoding/i);
    expect(gzipped.headers["content-security-policy"]).toMatch(/default-src 'none'/);
    expect(gzipped.body.length).toBeLessThan(plain.body.length / 3);
    expect(gunzipSync(gzipped.body).equals(plain.body)).toBe(true);

    // Without gzip (br alone, deflate alone) it goes as it is: never recompressed per request.
    for (const encoding of ["br", "deflate", "br;q=1, deflate;q=0.5"]) {
      const other = await rawGet(url, { accept: "text/html", "accept-encoding": encoding });
      expect(other.headers["content-encoding"], encoding).toBeUndefined();
      expect(other.body.equals(plain.body), encoding).toBe(true);
    }
  });

  it("compresses JSON and HTML answers, not small ones", async () => {
    for (const path of ["/openapi.json", "/ledger", "/llms.txt", "/api/info"]) {
      const answer = await rawGet(`${stack.service.url}${path}`, { "accept-encoding": "gzip" });
      expect(answer.headers["content-encoding"], path).toBe("gzip");
      expect(gunzipSync(answer.body).length).toBeGreaterThan(answer.body.length);
    }
    const small = await rawGet(`${stack.service.url}/api/claims/clm_AAAAAAAAAAAAAAAAAAAAAA`, {
      "accept-encoding": "gzip",
    });
    expect(small.headers["content-encoding"]).toBeUndefined();
  });
});
