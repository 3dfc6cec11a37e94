import { validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../../api/service.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { startTestService } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";

/** The offer document, /openapi.json, /docs and /llms.txt, against SPEC.md and each other. */

let stack: Stack;
let variantB: RunningService;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A" } });
  variantB = await startTestService(stack.chain, stack.database.url, {
    ROLE: "api",
    MATCHING_VARIANT: "B",
  });
});

afterAll(async () => {
  await variantB?.stop();
  await stack?.stop();
});

const SPEC_ROLES = [
  "info",
  "create_claim",
  "x402_pay_and_earn",
  "claim_status",
  "attach_tx",
  "receipt",
  "ledger",
  "health",
  "openapi",
  "llms",
];

describe("GET /api/info", () => {
  it("has every field of the offer document with the spec's values", async () => {
    const { status, body } = await stack.api("/api/info");
    expect(status).toBe(200);
    expect(body).toMatchObject({
      service: "pay-and-earn",
      site: stack.service.config.http.publicUrl,
      network: "Base",
      chain_id: 8453,
      testnet: false,
      token: "USDC",
      usdc_contract: BASE_USDC_ADDRESS,
      pay_to: stack.chain.payTo.address,
      price_usdc: "10",
      payout_usdc: "1",
      explorer: "https://basescan.org",
      receipt_signer: stack.chain.receiptSigner.address,
    });
    expect(typeof body.offer).toBe("string");
    expect(typeof body.email).toBe("string");
    expect(body.how_it_works).toHaveLength(4);
    expect(Object.keys(body.endpoints as object)).toEqual(expect.arrayContaining(SPEC_ROLES));
    expect(body.endpoints).toMatchObject({
      create_claim: "POST /api/claims",
      info: "GET /api/info",
      mcp: "POST /mcp",
      a2a_agent_card: "GET /.well-known/agent-card.json",
      a2a_jsonrpc: "POST /a2a",
    });
    expect(body.x402).toMatchObject({
      protocol: "x402 v2",
      scheme: "exact",
      network: "eip155:8453",
      asset: BASE_USDC_ADDRESS,
      amount_atomic: "10000000",
      amount_usdc: "10",
      pay_to: stack.chain.payTo.address,
    });
    const terms = (body.terms as string[]).join(" ");
    for (const term of [
      "unprofitable",
      "No refunds",
      "below the price",
      "Overpayments",
      "exactly one payout",
      "7 days",
    ]) {
      expect(terms).toContain(term);
    }
  });

  it("words step 2 by the matching variant", async () => {
    const a = (await stack.api<{ how_it_works: string[] }>("/api/info")).body.how_it_works[1];
    const b = (
      (await (await fetch(`${variantB.url}/api/info`)).json()) as { how_it_works: string[] }
    ).how_it_works[1];
    expect(a).toMatch(/exactly the claim's amount_due_usdc.*from any wallet/);
    expect(b).toMatch(/10 USDC.*from the claim's payout_address.*tx_hash/);
    expect(a).not.toBe(b);
  });
});

describe("GET /openapi.json", () => {
  it("is a valid OpenAPI 3.1.0 document, version 1.0.0, covering every route", async () => {
    const { status, body } = await stack.api<Record<string, unknown>>("/openapi.json");
    expect(status).toBe(200);
    expect(body.openapi).toBe("3.1.0");
    expect(body).toHaveProperty("info.version", "1.0.0");
    expect(await validate(structuredClone(body) as never)).toMatchObject({ valid: true });
    const paths = body.paths as Record<
      string,
      Record<string, { responses: Record<string, unknown> }>
    >;
    expect(Object.keys(paths).sort()).toEqual(
      [
        "/api/info",
        "/api/claims",
        "/api/claims/{claim_id}",
        "/api/claims/{claim_id}/tx",
        "/api/claims/{claim_id}/events",
        "/api/claims/{claim_id}/receipt",
        "/api/receipts/verify",
        "/api/payments/{tx_hash}",
        "/api/ledger",
        "/api/x402/earn",
        "/api/health",
        "/metrics",
        "/ledger",
        "/",
        "/claims",
        "/claims/{claim_id}",
        "/verify",
        "/payments",
        "/payments/{tx_hash}",
        "/graphql",
        "/openapi.json",
        "/docs",
        "/llms.txt",
        "/mcp",
        "/.well-known/agent-card.json",
        "/a2a",
      ].sort(),
    );
    expect(Object.keys(paths["/api/x402/earn"]?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "202", "400", "402", "429", "500", "503"]),
    );
    const badRequest = paths["/api/claims"]?.post?.responses["400"] as
      | { content: object }
      | undefined;
    const problem = badRequest?.content;
    expect(problem).toHaveProperty(["application/problem+json", "schema", "properties", "type"]);
    // What webhook receivers get, one entry per event type (docs/events.md).
    expect(Object.keys(body.webhooks as object).sort()).toEqual(
      [
        "claim.created",
        "claim.paid",
        "claim.paying",
        "claim.completed",
        "claim.expired",
        "claim.failed",
        "payment.unmatched",
      ].sort(),
    );
  });
});

describe("GET /docs", () => {
  it("renders every operation from local markup only", async () => {
    const response = await fetch(`${stack.service.url}/docs`);
    const page = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/text\/html/);
    expect(response.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
    for (const text of [
      "POST /api/claims",
      "GET /api/claims/{claim_id}/receipt",
      "POST /api/x402/earn",
    ]) {
      expect(page).toContain(text);
    }
    expect(page).not.toMatch(/<script|src="https?:|href="https?:\/\/(?!localhost)/);
  });
});

describe("GET /llms.txt", () => {
  it("follows llmstxt.org and says how to pay each way", async () => {
    const response = await fetch(`${stack.service.url}/llms.txt`);
    const text = await response.text();
    const site = stack.service.config.http.publicUrl;
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(text.split("\n")[0]).toBe("# pay-and-earn");
    expect(text).toMatch(/\n> Pay 10 USDC/);
    for (const section of [
      "## Pay with a claim",
      "## Pay with x402",
      "## Pay by mail",
      "## For agents: MCP and A2A",
      "## Docs",
      "## For people",
    ]) {
      expect(text).toContain(section);
    }
    for (const link of [
      `${site}/openapi.json`,
      `${site}/api/info`,
      `${site}/graphql`,
      `${site}/`,
      `${site}/verify`,
    ]) {
      expect(text).toContain(`](${link})`);
    }
    expect(text).toContain(`](${site}/mcp)`);
    expect(text).toContain(`](${site}/.well-known/agent-card.json)`);
    expect(text).not.toContain("not enabled on this deployment; every step");
    expect(text).toContain('maxAmountPerPayment: "$10"');
  });
});
