import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase } from "../../api/db/connect.ts";
import { healthRoutes } from "../../api/http/healthRoutes.ts";
import { metricsRoutes } from "../../api/http/metricsRoutes.ts";
import type { RunningService } from "../../api/service.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { startBlackHole } from "../support/blackHole.ts";
import { type Exposition, parsePrometheusText, sampleValue } from "../support/prometheusText.ts";
import { startTestService } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { startTestApp } from "../support/testApp.ts";
import { waitFor } from "../support/waitFor.ts";

/** GET /metrics: valid Prometheus text; HTTP, claims, payouts, backlog, wallet and lag. */

let stack: Stack;
const METRICS_TOKEN = "metrics-token-for-tests-0123456789";

beforeAll(async () => {
  // Rate limits on (tests default them off): the hung-database case checks the limiter too.
  stack = await startStack({ serviceEnv: { RATE_LIMIT_ENABLED: "true" } });
});

afterAll(async () => {
  await stack?.stop();
});

async function scrape(baseUrl = stack.service.url): Promise<Exposition> {
  const response = await fetch(`${baseUrl}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parsePrometheusText(await response.text());
}

function requestsOf(exposition: Exposition, route: string, status: string): number {
  return sampleValue(exposition, "http_requests_total", { method: "GET", route, status }) ?? 0;
}

async function claimsInDatabase(): Promise<Record<string, number>> {
  const rows = await stack.service.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from app.claims group by status`;
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

const createClaim = (payoutAddress: string) => stack.createClaim(payoutAddress);

describe("GET /metrics", () => {
  it("is valid Prometheus text with every family typed", async () => {
    const exposition = await scrape();
    expect(Object.fromEntries(exposition.types)).toMatchObject({
      http_requests_total: "counter",
      http_request_duration_seconds: "histogram",
      pay_and_earn_claims: "gauge",
      pay_and_earn_payouts_total: "counter",
      pay_and_earn_lag_blocks: "gauge",
      pay_and_earn_backlog_items: "gauge",
      pay_and_earn_backlog_oldest_seconds: "gauge",
      pay_and_earn_payout_wallet_balance: "gauge",
      pay_and_earn_dependency_up: "gauge",
      pay_and_earn_health_status: "gauge",
      process_cpu_seconds_total: "counter",
    });
  });

  it("counts and times requests by route pattern, never by raw path", async () => {
    const before = await scrape();
    for (let index = 0; index < 3; index++) await stack.api("/api/info");
    const rawId = "clm_rawIdMustNotBeALabel000";
    for (let index = 0; index < 2; index++) await stack.api(`/api/claims/${rawId}`);
    const after = await scrape();

    expect(requestsOf(after, "/api/info", "200") - requestsOf(before, "/api/info", "200")).toBe(3);
    expect(
      requestsOf(after, "/api/claims/:claimId", "404") -
        requestsOf(before, "/api/claims/:claimId", "404"),
    ).toBe(2);
    const timed = (exposition: Exposition) =>
      sampleValue(exposition, "http_request_duration_seconds_count", {
        method: "GET",
        route: "/api/info",
        status: "200",
      }) ?? 0;
    expect(timed(after) - timed(before)).toBe(3);
    const labels = after.samples.flatMap((sample) => Object.values(sample.labels));
    expect(labels).not.toContain(`/api/claims/${rawId}`);
    expect(labels.some((label) => label.includes(rawId))).toBe(false);
  });

  it("shows claims by status as the database has them", async () => {
    const user = stack.chain.users[1]?.address as string;
    // Distinct agent names: the same request again would get its open claim back.
    await stack.createClaim(user, { agent_name: "metrics-first" });
    await stack.createClaim(user, { agent_name: "metrics-second" });
    const database = await claimsInDatabase();
    expect(database.awaiting_payment).toBeGreaterThanOrEqual(2);
    await waitFor(
      async () => {
        const exposition = await scrape();
        return ["awaiting_payment", "paid", "paying", "completed", "failed", "expired"].every(
          (status) =>
            sampleValue(exposition, "pay_and_earn_claims", { status }) === (database[status] ?? 0),
        );
      },
      { what: "the claims gauge to match the database" },
    );
  });

  it("counts payouts sent and confirmed, and shows the payout wallet's balances", async () => {
    const payer = stack.chain.users[2];
    const holder = stack.chain.users[3]?.address as string;
    if (!payer) throw new Error("no user 2");
    const claim = await createClaim(holder);
    await stack.chain.transferUsdc(
      payer,
      stack.chain.payTo.address,
      BigInt(claim.amount_due_usdc.replace(".", "")),
    );
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");

    const exposition = await waitFor(
      async () => {
        const scraped = await scrape();
        return sampleValue(scraped, "pay_and_earn_payouts_total", { event: "confirmed" }) === 1
          ? scraped
          : undefined;
      },
      { what: "the confirmed payout to be counted" },
    );
    expect(sampleValue(exposition, "pay_and_earn_payouts_total", { event: "sent" })).toBe(1);
    expect(sampleValue(exposition, "pay_and_earn_payouts_total", { event: "reverted" })).toBe(0);
    expect(sampleValue(exposition, "pay_and_earn_claims", { status: "completed" })).toBe(1);

    const usdc = await stack.chain.publicClient.readContract({
      address: BASE_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [stack.chain.payout.address],
    });
    const eth = await stack.chain.publicClient.getBalance({ address: stack.chain.payout.address });
    expect(sampleValue(exposition, "pay_and_earn_payout_wallet_balance", { asset: "usdc" })).toBe(
      Number(usdc) / 1e6,
    );
    expect(
      sampleValue(exposition, "pay_and_earn_payout_wallet_balance", { asset: "eth" }),
    ).toBeCloseTo(Number(eth) / 1e18, 9);
    expect(sampleValue(exposition, "pay_and_earn_lag_blocks", { component: "indexer" })).toBe(0);
    expect(sampleValue(exposition, "pay_and_earn_backlog_items", { queue: "matcher" })).toBe(0);
    expect(sampleValue(exposition, "pay_and_earn_dependency_up", { dependency: "rpc" })).toBe(1);
  });
});

describe("GET /metrics with METRICS_TOKEN, on a worker", () => {
  let worker: RunningService;

  beforeAll(async () => {
    worker = await startTestService(stack.chain, stack.database.url, {
      ROLE: "worker",
      METRICS_TOKEN,
    });
  });

  afterAll(async () => {
    await worker?.stop();
  });

  it("is served for every role and wants the bearer token", async () => {
    for (const authorization of [undefined, "Bearer wrong-token-wrong-token-00", METRICS_TOKEN]) {
      const response = await fetch(`${worker.url}/metrics`, {
        headers: authorization ? { authorization } : {},
      });
      expect(response.status).toBe(401);
      expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(response.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    const response = await fetch(`${worker.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(response.status).toBe(200);
    parsePrometheusText(await response.text());
  });
});

describe("a scrape while a dependency hangs", () => {
  it("answers in time with the RPC hung: its values absent, the database's present", async () => {
    const hole = await startBlackHole();
    const stranded = await startTestService(
      { ...stack.chain, rpcUrl: `http://127.0.0.1:${hole.port}` },
      stack.database.url,
      { ROLE: "api" },
    );
    try {
      const started = Date.now();
      const exposition = await scrape(stranded.url);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(sampleValue(exposition, "pay_and_earn_dependency_up", { dependency: "rpc" })).toBe(0);
      expect(
        sampleValue(exposition, "pay_and_earn_dependency_up", { dependency: "database" }),
      ).toBe(1);
      expect(sampleValue(exposition, "pay_and_earn_health_status", { status: "down" })).toBe(1);
      expect(
        exposition.samples.filter((s) => s.name === "pay_and_earn_payout_wallet_balance"),
      ).toEqual([]);
      expect(sampleValue(exposition, "pay_and_earn_lag_blocks", { component: "indexer" })).toBe(
        undefined,
      );
      expect(
        sampleValue(exposition, "pay_and_earn_claims", { status: "awaiting_payment" }),
      ).toBeGreaterThan(0);
    } finally {
      await stranded.stop();
      await hole.stop();
    }
  });

  it("answers in time with the database hung, and the rate limiter lets reads through", async () => {
    const hole = await startBlackHole();
    const sql = connectDatabase(`postgres://postgres@127.0.0.1:${hole.port}/none`, { max: 2 });
    // The production count timeout (500 ms), not the tests' 10 s: it is what lets reads through.
    const config = stack.service.config;
    const app = await startTestApp({
      sql,
      config: { ...config, rateLimits: { ...config.rateLimits, countTimeoutMs: 500 } },
      routers: (deps) => [healthRoutes(deps), metricsRoutes(deps)],
    });
    try {
      let started = Date.now();
      const exposition = await scrape(app.url);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(
        sampleValue(exposition, "pay_and_earn_dependency_up", { dependency: "database" }),
      ).toBe(0);
      expect(exposition.samples.filter((s) => s.name === "pay_and_earn_claims")).toEqual([]);
      expect(exposition.samples.filter((s) => s.name === "pay_and_earn_payouts_total")).toEqual([]);
      expect(sampleValue(exposition, "pay_and_earn_health_status", { status: "down" })).toBe(1);

      started = Date.now();
      const health = await fetch(`${app.url}/api/health`);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({ reasons: ["database_unreachable"] });
      expect(
        app
          .logLines()
          .some(
            (line) =>
              line.msg ===
              "rate limit not counted; writes are refused and reads go through uncounted for a while",
          ),
      ).toBe(true);
    } finally {
      await app.stop();
      await sql.end({ timeout: 0 });
      await hole.stop();
    }
  });
});
