import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestJson } from "../support/http.ts";
import { type Stack, startStack } from "../support/stack.ts";

/**
 * Random bodies, path parameters and headers at every JSON route: never a 5xx, and every
 * answer (errors included) is what the OpenAPI document says. `requestJson` checks each one
 * against /openapi.json; this file checks status and problem shape on top.
 */

let stack: Stack;
let knownClaim: string;

beforeAll(async () => {
  stack = await startStack();
  const created = await stack.api<{ claim_id: string }>("/api/claims", {
    body: { payout_address: stack.chain.users[0]?.address },
  });
  expect(created.status).toBe(201);
  knownClaim = created.body.claim_id;
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
  fc.string({ minLength: 1, maxLength: 80 }),
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

const routes = [
  { method: "POST", path: () => "/api/claims" },
  { method: "GET", path: (id: string) => `/api/claims/${encodeURIComponent(id)}` },
  { method: "POST", path: (id: string) => `/api/claims/${encodeURIComponent(id)}/tx` },
  { method: "GET", path: (id: string) => `/api/claims/${encodeURIComponent(id)}/receipt` },
  { method: "POST", path: () => "/api/receipts/verify" },
  { method: "GET", path: (id: string) => `/api/payments/${encodeURIComponent(id)}` },
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
  it.each(routes)("$method $path never answers 5xx and always as documented", async (route) => {
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
