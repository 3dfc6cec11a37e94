import type { PaymentRequirements } from "@x402/core/types";
import fc from "fast-check";
import { keccak256, stringToHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestJson } from "../support/http.ts";
import { checkAgainstOpenApi } from "../support/openApiCheck.ts";
import { rawRequest } from "../support/rawHttp.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * Random bodies, path parameters and headers at every JSON route: never a 5xx, and every
 * answer (errors included) is what the OpenAPI document says. `requestJson` checks each one
 * against /openapi.json; this file checks status and problem shape on top.
 */

let stack: Stack;
let knownClaim: string;
let requirements: PaymentRequirements;

beforeAll(async () => {
  stack = await startStack();
  const created = await stack.api<{ claim_id: string }>("/api/claims", {
    body: { payout_address: stack.chain.users[0]?.address },
  });
  expect(created.status).toBe(201);
  knownClaim = created.body.claim_id;
  const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
    payout_address: stack.chain.users[0]?.address,
  });
  requirements = terms.accepts[0] as PaymentRequirements;
});

afterAll(async () => {
  await stack?.stop();
});

const RUNS = 40;

const printable = fc.string({
  unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789+/=_-.:~ "),
});
const hex = (length: number) =>
  fc.string({
    unit: fc.constantFrom(..."0123456789abcdefABCDEF"),
    minLength: length,
    maxLength: length,
  });
const almostAddress = fc.oneof(
  hex(40).map((digits) => `0x${digits}`),
  fc.string(),
  fc.integer(),
  fc.constant(null),
);
const almostHash = fc.oneof(
  hex(64).map((digits) => `0x${digits}`),
  hex(63).map((digits) => `0x${digits}`),
  fc.string(),
);
const claimBody = fc.record(
  {
    payout_address: almostAddress,
    tx_hash: almostHash,
    email: fc.oneof(fc.emailAddress(), fc.string()),
    agent_name: fc.string({ unit: "grapheme", maxLength: 80 }),
    extra: fc.jsonValue(),
  },
  { requiredKeys: [] },
);
const anyBody = fc.oneof(
  fc.jsonValue(),
  claimBody,
  fc.record({ message: fc.string(), signature: almostHash }),
);
const rawBody = fc.oneof(
  anyBody.map((body) => JSON.stringify(body) ?? "null"),
  fc.string({ maxLength: 200 }),
  fc.string({ minLength: 17_000, maxLength: 17_100 }),
);
const contentType = fc.constantFrom(
  "application/json",
  "application/json; charset=utf-8",
  "text/plain",
  "application/x-www-form-urlencoded",
);
const pathParameter = fc.oneof(
  // "." and ".." (however encoded) are resolved away by the client's URL parser: another path.
  // The raw-bytes test below sends them as they are.
  fc.string({ minLength: 1, maxLength: 80 }).filter((text) => text !== "." && text !== ".."),
  hex(64).map((digits) => `0x${digits}`),
  fc.constant("clm_AAAAAAAAAAAAAAAAAAAAAA"),
  fc.constant("known").map(() => knownClaim),
);
const extraHeaders = fc.record(
  {
    "payment-signature": fc.oneof(
      printable,
      fc.base64String(),
      anyBody.map((body) => Buffer.from(JSON.stringify(body) ?? "").toString("base64")),
    ),
    "x-request-id": printable,
  },
  { requiredKeys: [] },
);

const segment = (id: string) => encodeURIComponent(id);

const routes = [
  { method: "POST", path: () => "/api/claims" },
  { method: "GET", path: (id: string) => `/api/claims/${segment(id)}` },
  { method: "POST", path: (id: string) => `/api/claims/${segment(id)}/tx` },
  { method: "GET", path: (id: string) => `/api/claims/${segment(id)}/receipt` },
  { method: "POST", path: () => "/api/receipts/verify" },
  { method: "GET", path: (id: string) => `/api/payments/${segment(id)}` },
  {
    method: "GET",
    path: (id: string) =>
      `/api/ledger?limit=${encodeURIComponent(id)}&cursor=${encodeURIComponent(id)}`,
  },
  { method: "POST", path: () => "/api/x402/earn" },
  { method: "GET", path: () => "/api/x402/earn" },
  { method: "GET", path: () => "/api/info" },
];

describe("random input at every JSON route", () => {
  const named = routes.map((route) => ({ ...route, name: route.path("{id}") }));
  it.each(named)("$method $name never answers 5xx and always as documented", async (route) => {
    await fc.assert(
      fc.asyncProperty(
        pathParameter,
        rawBody,
        contentType,
        extraHeaders,
        async (id, body, type, headers) => {
          const response = await requestJson(`${stack.service.url}${route.path(id)}`, {
            method: route.method,
            ...(route.method === "POST" ? { rawBody: body } : {}),
            headers: { ...(route.method === "POST" ? { "content-type": type } : {}), ...headers },
          });
          expect(response.status).toBeLessThan(500);
          if (response.status >= 400 && response.status !== 402) {
            expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
            expect(response.body).toHaveProperty(
              "type",
              expect.stringMatching(/^\/problems\/[a-z_]+$/),
            );
          }
        },
      ),
      { numRuns: RUNS },
    );
  });
});

// ── The other public routes, their queries and headers ──────────────────────────────────────

const anyText = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: "grapheme", maxLength: 30 }),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.constantFrom("", " ", "\u0000", "caf\u00E9", "cafe\u0301", "ali\u200Bce", "%", "%ZZ"),
);
const timeText = fc.oneof(
  fc.date({ noInvalidDate: true }).map((date) => date.toISOString()),
  fc.date({ noInvalidDate: true }).map((date) => date.toISOString().slice(0, 10)),
  fc.constantFrom("2025-02-30", "2025-01-01T25:00:00Z", "0000-00-00", "-1", "+275760-09-13"),
  anyText,
);
const ledgerParams = fc.record(
  {
    limit: fc.oneof(fc.integer({ min: -5, max: 150 }).map(String), anyText),
    cursor: fc.oneof(anyText, fc.base64String()),
    agent_name: anyText,
    since: timeText,
    until: timeText,
    extra: anyText,
  },
  { requiredKeys: [] },
);
const searchOf = (params: Record<string, string>) => {
  const search = new URLSearchParams(params).toString();
  return search ? `?${search}` : "";
};

/** Every error answer is a documented problem (GraphQL answers with its own `errors`). */
function expectWellFormedError(response: Awaited<ReturnType<typeof requestJson>>) {
  expect(response.status).toBeLessThan(500);
  const type = response.headers.get("content-type") ?? "";
  if (response.status >= 400 && response.status !== 402 && type.includes("json")) {
    expect(type).toMatch(/^application\/problem\+json/);
    expect(response.body).toHaveProperty("type", expect.stringMatching(/^\/problems\/[a-z_]+$/));
  }
}

const queryRoutes: { name: string; path: (params: Record<string, string>) => string }[] = [
  { name: "GET /api/ledger", path: (params) => `/api/ledger${searchOf(params)}` },
  { name: "GET /ledger", path: (params) => `/ledger${searchOf(params)}` },
  { name: "GET /docs", path: (params) => `/docs${searchOf(params)}` },
  { name: "GET /api/health", path: (params) => `/api/health${searchOf(params)}` },
  { name: "GET /metrics", path: (params) => `/metrics${searchOf(params)}` },
];

describe("random queries and headers at the other public routes", () => {
  it.each(queryRoutes)("$name never answers 5xx and always as documented", async (route) => {
    await fc.assert(
      fc.asyncProperty(ledgerParams, extraHeaders, anyText, async (params, headers, auth) => {
        const response = await requestJson(`${stack.service.url}${route.path(params)}`, {
          headers: {
            ...headers,
            authorization: `Bearer ${auth.replace(/[^\x20-\x7e]/g, "")}`,
            accept: "text/html,application/json;q=0.9",
          },
        });
        expectWellFormedError(response);
      }),
      { numRuns: RUNS },
    );
  });
});

// ── GraphQL ──────────────────────────────────────────────────────────────────────────────────

const graphqlArgument = fc.oneof(
  anyText.map((text) => JSON.stringify(text)),
  fc.integer({ min: -3_000_000_000, max: 3_000_000_000 }).map(String),
  fc.constantFrom("null", "true", "1.5", "$v", "[1]", "{a: 1}"),
);
const ledgerField = fc
  .record(
    {
      first: graphqlArgument,
      after: graphqlArgument,
      agentName: graphqlArgument,
      since: graphqlArgument,
      until: graphqlArgument,
    },
    { requiredKeys: [] },
  )
  .map((args) => {
    const list = Object.entries(args).map(([name, value]) => `${name}: ${value}`);
    const call = list.length ? `(${list.join(", ")})` : "";
    return `{ ledger${call} { nodes { claimId agentName completedAt } pageInfo { hasNextPage endCursor } } }`;
  });
const graphqlQuery = fc.oneof(
  ledgerField,
  graphqlArgument.map((days) => `{ stats { completedPayouts daily(days: ${days}) { day } } }`),
  pathParameter.map((id) => `{ claim(id: ${JSON.stringify(id)}) { id status payoutTx } }`),
  fc.string({ maxLength: 200 }),
  fc.constantFrom(
    "{ __typename }",
    "{ offer { service } }",
    "mutation { createClaim }",
    "subscription { ledger }",
    "query ($d: Int) { stats { daily(days: $d) { day } } }",
    "query A { __typename } query B { __typename }",
    "fragment F on Query { ...F } { ...F }",
    "{ a: stats { daily(days: 366) { day } } b: stats { daily(days: 366) { day } } }",
  ),
);
const graphqlBody = fc.oneof(
  fc.record(
    {
      query: graphqlQuery,
      variables: fc.oneof(
        fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue()),
        fc.jsonValue(),
      ),
      operationName: fc.oneof(fc.string({ maxLength: 10 }), fc.constant(null)),
      extensions: fc.jsonValue(),
    },
    { requiredKeys: ["query"] },
  ),
  fc.jsonValue(),
);

describe("random GraphQL at /graphql", () => {
  it("POST never answers 5xx and always as documented", async () => {
    await fc.assert(
      fc.asyncProperty(graphqlBody, extraHeaders, async (body, headers) => {
        const response = await requestJson(`${stack.service.url}/graphql`, {
          rawBody: JSON.stringify(body) ?? "null",
          headers: { ...headers, "content-type": "application/json" },
        });
        expect(response.status).toBeLessThan(500);
        if (response.status === 200 && typeof body === "object" && body && "query" in body) {
          expect(response.body).toSatisfy(
            (answer: Record<string, unknown>) => "data" in answer || "errors" in answer,
          );
        }
      }),
      { numRuns: RUNS * 2 },
    );
  });

  it("GET never answers 5xx and always as documented", async () => {
    await fc.assert(
      fc.asyncProperty(
        graphqlQuery,
        fc.constantFrom(
          "application/json",
          "text/html",
          "*/*",
          "application/graphql-response+json",
        ),
        async (query, accept) => {
          const response = await requestJson(
            `${stack.service.url}/graphql?query=${encodeURIComponent(query)}`,
            { headers: { accept } },
          );
          expect(response.status).toBeLessThan(500);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

// ── Raw bytes in the request target ──────────────────────────────────────────────────────────

/** What no client library sends: bad percent-escapes, overlong UTF-8, NUL, CR/LF, spaces. */
const rawFragment = fc.oneof(
  fc.constantFrom(
    "%",
    "%G1",
    "%E0%A4%A",
    "%C0%AF",
    "%C0%80",
    "%ED%A0%80",
    "%F4%90%80%80",
    "%00",
    "%FF",
    "%2F",
    "%25",
    "%2e%2e",
    "clm_AAAAAAAAAAAAAAAAAAAAAA",
  ),
  fc.constantFrom(
    Buffer.from([0x00]),
    Buffer.from([0xc0, 0xaf]),
    Buffer.from([0xc0, 0x80]),
    Buffer.from([0xed, 0xa0, 0x80]),
    Buffer.from([0xff, 0xfe]),
    Buffer.from([0x7f]),
    Buffer.from("\r\nX-Injected: 1"),
    Buffer.from(" "),
    Buffer.from("\t"),
  ),
  fc.string({ unit: fc.constantFrom(..."abcdefABCDEF0123456789_-.~:@!$'()*+,;"), maxLength: 12 }),
);
const rawSegment = fc
  .array(rawFragment, { minLength: 1, maxLength: 6 })
  .map((parts) =>
    Buffer.concat(
      parts.map((part) => (typeof part === "string" ? Buffer.from(part, "latin1") : part)),
    ),
  )
  // An empty segment is another route (`/api/claims/`), not a malformed one.
  .filter((bytes) => bytes.length > 0);

const rawRoutes: {
  name: string;
  method: string;
  target: (segment: Buffer) => Buffer;
  /** A URL of the same route, for the OpenAPI check. */
  documented: string;
  body?: string;
}[] = [
  {
    name: "GET /api/claims/{raw}",
    method: "GET",
    target: (segment) => Buffer.concat([Buffer.from("/api/claims/"), segment]),
    documented: "/api/claims/x",
  },
  {
    name: "GET /api/claims/{raw}/receipt",
    method: "GET",
    target: (segment) =>
      Buffer.concat([Buffer.from("/api/claims/"), segment, Buffer.from("/receipt")]),
    documented: "/api/claims/x/receipt",
  },
  {
    name: "POST /api/claims/{raw}/tx",
    method: "POST",
    target: (segment) => Buffer.concat([Buffer.from("/api/claims/"), segment, Buffer.from("/tx")]),
    documented: "/api/claims/x/tx",
    body: JSON.stringify({ tx_hash: `0x${"ab".repeat(32)}` }),
  },
  {
    name: "GET /api/payments/{raw}",
    method: "GET",
    target: (segment) => Buffer.concat([Buffer.from("/api/payments/"), segment]),
    documented: "/api/payments/x",
  },
  {
    name: "GET /api/ledger?agent_name={raw}&since={raw}",
    method: "GET",
    target: (segment) =>
      Buffer.concat([
        Buffer.from("/api/ledger?agent_name="),
        segment,
        Buffer.from("&since="),
        segment,
      ]),
    documented: "/api/ledger",
  },
  {
    name: "GET /ledger?agent_name={raw}",
    method: "GET",
    target: (segment) => Buffer.concat([Buffer.from("/ledger?agent_name="), segment]),
    documented: "/ledger",
  },
];

describe("raw malformed bytes in paths and queries", () => {
  it.each(rawRoutes)("$name never answers 5xx and always as documented", async (route) => {
    await fc.assert(
      fc.asyncProperty(rawSegment, async (segment) => {
        const response = await rawRequest(stack.service.url, route.method, route.target(segment), {
          ...(route.body
            ? { body: route.body, headers: { "content-type": "application/json" } }
            : {}),
        });
        expect(response.status).toBeLessThan(500);
        // Refused by Node's HTTP parser before the app (no request id): a bare 400.
        if (!response.headers["x-request-id"]) {
          expect(response.status).toBe(400);
          return;
        }
        const type = response.headers["content-type"] ?? null;
        const text = response.body.toString("utf8");
        const body = type?.includes("json") ? JSON.parse(text) : { text };
        if (response.status >= 400 && type?.includes("json")) {
          expect(type).toMatch(/^application\/problem\+json/);
          expect(body).toHaveProperty("type", expect.stringMatching(/^\/problems\/[a-z_]+$/));
        }
        expect(text).not.toMatch(/URIError|node_modules|at \w+ \(/);
        // A space, tab, CR or LF ends the request target early: the app saw another path.
        if (segment.some((byte) => byte <= 0x20)) return;
        await checkAgainstOpenApi(
          `${stack.service.url}${route.documented}`,
          route.method,
          response.status,
          type,
          body,
        );
      }),
      { numRuns: RUNS },
    );
  });
});

// ── x402: structurally valid payloads that reach the facilitator's verify ───────────────────

/** Refusals only the facilitator's verify can give (the local checks never look at these). */
const VERIFY_REFUSALS = [
  "invalid_signature",
  "insufficient_balance",
  "authorization_expired",
  "authorization_not_yet_valid",
  "payment_invalid",
];

const signedPayment = fc
  .record({
    payer: fc.constantFrom("funded", "unfunded"),
    signer: fc.constantFrom("payer", "someone_else"),
    window: fc.constantFrom("valid", "expired", "not_yet_valid"),
    seed: fc.integer({ min: 1, max: 1_000_000 }),
  })
  // Each payment is wrong in some way the facilitator must find: none of them settles.
  .filter((p) => !(p.payer === "funded" && p.signer === "payer" && p.window === "valid"));

describe("x402 payloads that reach verify", () => {
  it("are refused with the facilitator's reason, never a 5xx, nothing settled", async () => {
    const before = await stack.chain.usdcBalance(stack.chain.payTo.address);
    await fc.assert(
      fc.asyncProperty(signedPayment, async ({ payer, signer, window, seed }) => {
        const keyOf = (salt: string) => keccak256(stringToHex(`${salt}:${seed}`));
        const account = privateKeyToAccount(
          payer === "funded" ? stack.chain.user(1).privateKey : keyOf("payer"),
        );
        const now = BigInt(Math.floor(Date.now() / 1000));
        const header = await handSignedPayment(account, requirements, {
          ...(signer === "someone_else" ? { signer: privateKeyToAccount(keyOf("signer")) } : {}),
          ...(window === "expired" ? { validBefore: now - 60n } : {}),
          ...(window === "not_yet_valid" ? { validAfter: now + 3_600n } : {}),
        });
        const response = await requestJson<{ reason?: string }>(
          `${stack.service.url}/api/x402/earn`,
          {
            body: { payout_address: stack.chain.users[2]?.address },
            headers: { "payment-signature": header },
          },
        );
        expect(response.status, JSON.stringify(response.body)).toBe(402);
        expect(VERIFY_REFUSALS).toContain(response.body.reason);
      }),
      { numRuns: RUNS },
    );
    expect(await stack.chain.usdcBalance(stack.chain.payTo.address)).toBe(before);
  });
});
