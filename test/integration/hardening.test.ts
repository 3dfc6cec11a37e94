import { Router } from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientAddress } from "../../api/rateLimits/clientAddress.ts";
import type { RunningService } from "../../api/service.ts";
import { startTestService } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { startTestApp } from "../support/testApp.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * What every route gets: security headers, CORS on the public routes, rate limits counted in
 * PostgreSQL (shared by replicas), request ids, and problems (never stacks) for every error.
 */

const WRITES_PER_WINDOW = 3;
/** Settings of every service in this file: small write limits, a window no test outlasts. */
const LIMITED = {
  RATE_LIMIT_ENABLED: "true",
  RATE_LIMIT_WRITES: String(WRITES_PER_WINDOW),
  RATE_LIMIT_READS: "1000",
  RATE_LIMIT_WINDOW_SECONDS: "3600",
};

let stack: Stack;
let user: string;
/** A second replica on the same database; it trusts the proxy (loopback) like the first. */
let replica: RunningService;
/** A replica that trusts no proxy: X-Forwarded-For must not change who it counts. */
let untrusting: RunningService;
let unlimited: RunningService;
let clients = 0;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { ...LIMITED, TRUST_PROXY: "loopback" } });
  user = stack.chain.users[0]?.address as string;
  const env = (extra: Record<string, string>) =>
    startTestService(stack.chain, stack.database.url, { ROLE: "api", ...LIMITED, ...extra });
  [replica, untrusting, unlimited] = await Promise.all([
    env({ TRUST_PROXY: "loopback" }),
    env({}),
    env({ TRUST_PROXY: "loopback", RATE_LIMIT_ENABLED: "false" }),
  ]);
});

afterAll(async () => {
  await Promise.all([replica?.stop(), untrusting?.stop(), unlimited?.stop()]);
  await stack?.stop();
});

/** A client address of its own per test (TEST-NET-3), sent as the proxy would. */
function newClient(): string {
  clients += 1;
  return `203.0.113.${clients}`;
}

async function request(
  baseUrl: string,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const response = await fetch(`${baseUrl}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: {
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
      ...init.headers,
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: (text && response.headers.get("content-type")?.includes("json")
      ? JSON.parse(text)
      : {}) as Record<string, unknown>,
  };
}

let agentNames = 0;
/** A new claim each time: the same payout address with the same fields would get its open one back. */
function createClaim(baseUrl: string, client: string) {
  agentNames += 1;
  return request(baseUrl, "/api/claims", {
    body: { payout_address: user, agent_name: `hardening-${agentNames}` },
    headers: { "x-forwarded-for": client },
  });
}

describe("security headers", () => {
  it("are on JSON answers and on problems", async () => {
    for (const path of ["/api/info", "/api/claims/clm_unknown0000000000000000", "/nowhere"]) {
      const { headers } = await request(stack.service.url, path);
      expect(headers.get("x-content-type-options")).toBe("nosniff");
      expect(headers.get("x-frame-options")).toBe("DENY");
      expect(headers.get("referrer-policy")).toBe("same-origin");
      expect(headers.get("content-security-policy")).toBe(
        "default-src 'none'; frame-ancestors 'none'",
      );
      expect(headers.get("x-powered-by")).toBeNull();
      // PUBLIC_URL is http here: no HSTS.
      expect(headers.get("strict-transport-security")).toBeNull();
    }
  });

  it("leave a route's own Content-Security-Policy alone, and send HSTS when PUBLIC_URL is https", async () => {
    const pagePolicy = "default-src 'self'; script-src 'self' 'nonce-abc'";
    const pages = Router();
    pages.get("/page", (_request, response) => {
      response.set("content-security-policy", pagePolicy).type("html").send("<p>hi</p>");
    });
    pages.get("/bare-page", (_request, response) => {
      response.type("html").send("<p>no policy</p>");
    });
    const app = await startTestApp({
      sql: stack.service.sql,
      config: {
        ...stack.service.config,
        http: { ...stack.service.config.http, publicUrl: "https://pay.example" },
      },
      routers: () => [pages],
    });
    try {
      const page = await request(app.url, "/page");
      expect(page.headers.get("content-security-policy")).toBe(pagePolicy);
      expect(page.headers.get("x-frame-options")).toBe("DENY");
      expect(page.headers.get("strict-transport-security")).toBe("max-age=31536000");
      // An HTML page without a policy of its own still cannot be framed.
      const bare = await request(app.url, "/bare-page");
      expect(bare.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    } finally {
      await app.stop();
    }
  });
});

describe("CORS", () => {
  it("answers the preflight of a paid POST /api/claims retry from any origin with 204", async () => {
    const { status, headers, text } = await request(stack.service.url, "/api/claims", {
      method: "OPTIONS",
      headers: {
        origin: "https://agent.example",
        "access-control-request-method": "POST",
        "access-control-request-headers":
          "content-type,payment-signature,access-control-expose-headers",
      },
    });
    expect(status).toBe(204);
    expect(text).toBe("");
    expect(headers.get("access-control-allow-origin")).toBe("*");
    expect(headers.get("access-control-allow-methods")?.split(/,\s*/)).toContain("POST");
    const allowed = (headers.get("access-control-allow-headers") ?? "").toLowerCase().split(/,\s*/);
    expect(allowed).toEqual(
      expect.arrayContaining([
        "content-type",
        "payment-signature",
        "access-control-expose-headers",
      ]),
    );
    expect(headers.get("access-control-allow-credentials")).toBeNull();
  });

  it("exposes the x402 and retry headers on public answers, errors included", async () => {
    for (const path of ["/api/info", "/api/claims/clm_unknown0000000000000000", "/api/health"]) {
      const { headers } = await request(stack.service.url, path, {
        headers: { origin: "https://agent.example" },
      });
      expect(headers.get("access-control-allow-origin")).toBe("*");
      const exposed = (headers.get("access-control-expose-headers") ?? "").split(/,\s*/);
      expect(exposed).toEqual(
        expect.arrayContaining(["PAYMENT-REQUIRED", "PAYMENT-RESPONSE", "Retry-After", "Location"]),
      );
    }
  });

  it("is not offered on routes that are not public", async () => {
    const metrics = await request(stack.service.url, "/metrics", {
      headers: { origin: "https://agent.example" },
    });
    expect(metrics.headers.get("access-control-allow-origin")).toBeNull();
    const preflight = await request(stack.service.url, "/graphql/anything", {
      method: "OPTIONS",
      headers: { origin: "https://agent.example", "access-control-request-method": "POST" },
    });
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("rate limits", () => {
  it("answer the write after the limit with 429, Retry-After and a problem; reads go on", async () => {
    const client = newClient();
    for (let index = 0; index < WRITES_PER_WINDOW; index++) {
      expect((await createClaim(stack.service.url, client)).status).toBe(201);
    }
    const limited = await createClaim(stack.service.url, client);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(limited.body).toMatchObject({ type: "/problems/rate_limited", status: 429 });
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // A page can read the 429 and its Retry-After.
    expect(limited.headers.get("access-control-allow-origin")).toBe("*");

    const read = await request(stack.service.url, "/api/info", {
      headers: { "x-forwarded-for": client },
    });
    expect(read.status).toBe(200);
    // Another client is not affected.
    expect((await createClaim(stack.service.url, newClient())).status).toBe(201);
  });

  it("answer MCP and A2A over the limit in JSON-RPC: 429, Retry-After, the problem's type in data", async () => {
    const base = stack.service.url.replace("127.0.0.1", "localhost");
    const calls = {
      "/mcp": {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "create_claim", arguments: { payout_address: "0x1" } },
      },
      "/a2a": {
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: {
          message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "earn to 0x1" }] },
        },
      },
    };
    for (const [path, body] of Object.entries(calls)) {
      const client = newClient();
      const send = () =>
        request(base, path, {
          body,
          headers: { "x-forwarded-for": client, accept: "application/json, text/event-stream" },
        });
      for (let index = 0; index < WRITES_PER_WINDOW; index++) {
        expect((await send()).status, path).toBe(200);
      }
      const limited = await send();
      expect(limited.status, path).toBe(429);
      expect(limited.headers.get("content-type"), path).toMatch(/^application\/json/);
      expect(limited.body, path).toMatchObject({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32000, data: { type: "/problems/rate_limited", status: 429 } },
      });
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(3500);
    }
  });

  it("are shared by replicas on the same database", async () => {
    const client = newClient();
    // Each replica adds its counts to the shared row in batches (a few ms later): wait for
    // them there before asking the other replica. (A replica that already counts this client
    // learns the others' counts at its next flush: the overshoot is bounded, not zero.)
    const counted = (requests: number) =>
      waitFor(
        async () => {
          const [row] = await stack.service.sql<{ count: number }[]>`
          select count from app.rate_limits where key = ${`write:${clientAddress(client)}`}`;
          return row?.count === requests;
        },
        { what: `${requests} writes counted in PostgreSQL` },
      );
    for (let index = 0; index < WRITES_PER_WINDOW; index++) {
      expect((await createClaim(stack.service.url, client)).status).toBe(201);
    }
    await counted(WRITES_PER_WINDOW);
    // The replica has never seen this client: it reads the shared count and refuses.
    expect((await createClaim(replica.url, client)).status).toBe(429);
    await counted(WRITES_PER_WINDOW + 1);
    expect((await createClaim(stack.service.url, client)).status).toBe(429);
  });

  it("count invalid requests too, and the limit is per client address", async () => {
    const client = newClient();
    for (let index = 0; index < WRITES_PER_WINDOW; index++) {
      const bad = await request(stack.service.url, "/api/claims", {
        body: {},
        headers: { "x-forwarded-for": client },
      });
      expect(bad.status).toBe(400);
    }
    expect((await createClaim(stack.service.url, client)).status).toBe(429);
  });

  it("ignore X-Forwarded-For unless TRUST_PROXY says a proxy is in front", async () => {
    const statuses: number[] = [];
    for (let index = 0; index <= WRITES_PER_WINDOW; index++) {
      // A new forged address each time: without a trusted proxy, all are 127.0.0.1.
      statuses.push((await createClaim(untrusting.url, newClient())).status);
    }
    expect(statuses).toEqual([...Array(WRITES_PER_WINDOW).fill(201), 429]);
  });

  it("count GraphQL queries as reads and GraphQL mutations as writes", async () => {
    const graphql = (client: string, query: string) =>
      request(stack.service.url, "/graphql", {
        body: { query },
        headers: { "x-forwarded-for": client },
      });
    const reader = newClient();
    for (let index = 0; index <= WRITES_PER_WINDOW; index++) {
      expect((await graphql(reader, "{ info { price_usdc } }")).status).not.toBe(429);
    }
    const writer = newClient();
    const statuses: number[] = [];
    for (let index = 0; index <= WRITES_PER_WINDOW; index++) {
      const mutation = 'mutation { createClaim(payout_address: "0x0") { claim_id } }';
      statuses.push((await graphql(writer, mutation)).status);
    }
    expect(statuses.slice(0, WRITES_PER_WINDOW)).not.toContain(429);
    expect(statuses[WRITES_PER_WINDOW]).toBe(429);
  });

  it("can be turned off", async () => {
    const client = newClient();
    for (let index = 0; index <= WRITES_PER_WINDOW + 1; index++) {
      expect((await createClaim(unlimited.url, client)).status).toBe(201);
    }
  });

  it("count IPv6 clients by their /64 and IPv4-mapped addresses as IPv4", () => {
    expect(clientAddress("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(clientAddress("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(clientAddress("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientAddress("::1")).toBe("0:0:0:0::/64");
    expect(clientAddress("::ffff:198.51.100.7")).toBe("198.51.100.7");
    expect(clientAddress("198.51.100.7")).toBe("198.51.100.7");
    expect(clientAddress(undefined)).toBe("unknown");
    expect(clientAddress("2001:db8:1:2:aaaa::1", 48)).toBe("2001:db8:1::/48");
    expect(clientAddress("198.51.100.7", 48)).toBe("198.51.100.7");
  });

  it("count claim creation by IPv6 /48: its /64s share one limit; other writes keep /64s apart", async () => {
    const site = "2001:db8:4848";
    for (let index = 0; index < WRITES_PER_WINDOW; index++) {
      expect((await createClaim(stack.service.url, `${site}:${index + 1}::1`)).status).toBe(201);
    }
    expect((await createClaim(stack.service.url, `${site}:77::1`)).status).toBe(429);
    // Another /48 is another client.
    expect((await createClaim(stack.service.url, "2001:db8:4849:1::1")).status).toBe(201);
    // A write that opens no claim (attaching to an unknown claim) is still counted by /64.
    const attach = await request(stack.service.url, "/api/claims/clm_AAAAAAAAAAAAAAAAAAAAAA/tx", {
      body: { tx_hash: `0x${"ab".repeat(32)}` },
      headers: { "x-forwarded-for": `${site}:78::1` },
    });
    expect(attach.status).toBe(404);
  });
});

describe("public reads per IPv6 /48", () => {
  it("count reads by IPv6 /48: a site's /64s share one read budget, another /48 has its own", async () => {
    const fewReads = await startTestService(stack.chain, stack.database.url, {
      ROLE: "api",
      ...LIMITED,
      RATE_LIMIT_READS: "3",
      TRUST_PROXY: "loopback",
    });
    try {
      const site = "2001:db8:4850";
      const read = (client: string) =>
        request(fewReads.url, "/api/payments/0xnot-a-hash", {
          headers: { "x-forwarded-for": client },
        });
      for (let index = 1; index <= 3; index++) {
        expect((await read(`${site}:${index}::1`)).status).toBe(400);
      }
      expect((await read(`${site}:99::1`)).status).toBe(429);
      expect((await read("2001:db8:4851:1::1")).status).toBe(400);
    } finally {
      await fewReads.stop();
    }
  });
});

describe("request ids", () => {
  it("are generated, or taken from a sane X-Request-Id, and echoed", async () => {
    const generated = await request(stack.service.url, "/api/info");
    expect(generated.headers.get("x-request-id")).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    const kept = await request(stack.service.url, "/api/info", {
      headers: { "x-request-id": "lb-7f3a.42:ab_c" },
    });
    expect(kept.headers.get("x-request-id")).toBe("lb-7f3a.42:ab_c");
    for (const insane of ["x".repeat(200), "<script>", "two words", "-leading-dash"]) {
      const replaced = await request(stack.service.url, "/api/info", {
        headers: { "x-request-id": insane },
      });
      expect(replaced.headers.get("x-request-id")).not.toBe(insane);
      expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});

describe("errors", () => {
  const failing = Router();
  failing.get("/test-only/rejects", async () => {
    throw new Error("relation app.secret_table at /srv/api/claims/createClaim.ts:42");
  });
  failing.get("/test-only/throws", (_request, response) => {
    const missing = undefined as unknown as { internalField: string };
    response.json({ value: missing.internalField }); // throws synchronously
  });
  failing.get("/test-only/logs", (_request, response) => {
    app.deps.logger.info({ step: "inside the handler" }, "domain work");
    response.json({ ok: true });
  });
  let app: Awaited<ReturnType<typeof startTestApp>>;

  beforeAll(async () => {
    app = await startTestApp({
      sql: stack.service.sql,
      config: stack.service.config,
      routers: () => [failing],
    });
  });

  afterAll(async () => {
    await app?.stop();
  });

  it.each(["/test-only/rejects", "/test-only/throws"])(
    "%s: a 500 problem with the request id, no stack, no internal names",
    async (path) => {
      const { status, headers, body, text } = await request(app.url, path, {
        headers: { "x-request-id": "support-ticket-1" },
      });
      expect(status).toBe(500);
      expect(headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(body).toMatchObject({
        type: "/problems/internal_error",
        status: 500,
        request_id: "support-ticket-1",
      });
      expect(text).not.toMatch(/secret_table|createClaim|internalField|\.ts|at |stack|Error/);
      // The log has what the answer leaves out, under the same id.
      const logged = app
        .logLines()
        .find((line) => line.msg === "unhandled error" && line.request_id === "support-ticket-1");
      expect(JSON.stringify(logged)).toMatch(/secret_table|internalField/);
    },
  );

  it("every log line of a request carries its id, the request line included", async () => {
    const { headers } = await request(app.url, "/test-only/logs");
    const id = headers.get("x-request-id");
    const lines = app.logLines().filter((line) => line.request_id === id);
    expect(lines.map((line) => line.msg)).toEqual(["domain work", "request"]);
    expect(lines[1]).toMatchObject({
      method: "GET",
      route: "/test-only/logs",
      status: 200,
    });
  });

  it("answers 404 and 405 with problems; a 405 names the allowed methods", async () => {
    const missing = await request(stack.service.url, "/api/nothing-here");
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ type: "/problems/not_found" });

    // DELETE and PUT are writes: a client of their own, so earlier tests' counts do not matter.
    const headers = { "x-forwarded-for": newClient() };
    const wrongMethod = await request(stack.service.url, "/api/info", {
      method: "DELETE",
      headers,
    });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(wrongMethod.body).toMatchObject({ type: "/problems/method_not_allowed" });
    expect(wrongMethod.headers.get("allow")).toBe("GET, HEAD, OPTIONS");

    const putClaim = await request(stack.service.url, "/api/claims/clm_x", {
      method: "PUT",
      headers,
    });
    expect(putClaim.status).toBe(405);
  });

  it("answers a malformed body and a bad path encoding with problems", async () => {
    const malformed = await fetch(`${stack.service.url}/api/receipts/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"message": ',
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ type: "/problems/malformed_json" });

    // Valid JSON, 5,000 levels deep in under 16 kB: refused before anything walks it.
    const deep = await fetch(`${stack.service.url}/api/receipts/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"message": ${"[".repeat(5_000)}${"]".repeat(5_000)}}`,
    });
    expect(deep.status).toBe(400);
    expect(await deep.json()).toMatchObject({
      type: "/problems/malformed_json",
      detail: expect.stringContaining("nested deeper than 64 levels"),
    });

    // The same depth in UTF-7, where a bracket is base64 ("+AFs-"): a charset other than
    // UTF-8 is refused before the body is decoded, on the agent surfaces too.
    for (const path of ["/api/receipts/verify", "/mcp", "/a2a"]) {
      const utf7 = await fetch(`${stack.service.url}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json; charset=utf-7",
          accept: "application/json, text/event-stream",
        },
        body: `+${"AFsAWwBb".repeat(400)}-${"]".repeat(1_200)}`,
      });
      expect(utf7.status, path).toBe(415);
      expect(await utf7.text(), path).not.toMatch(/RangeError|stack|node_modules/);
    }

    const badEncoding = await request(stack.service.url, "/api/claims/%E0%A4%A");
    expect(badEncoding.status).toBe(400);
    expect(badEncoding.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(badEncoding.text).not.toMatch(/URIError|decodeURIComponent|node_modules/);
  });
});
