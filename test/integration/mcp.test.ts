import { execFile } from "node:child_process";
import { request } from "node:http";
import { promisify } from "node:util";
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from "@modelcontextprotocol/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { x402Client } from "@x402/core/client";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { type DiscoveryExtension, validateDiscoveryExtension } from "@x402/extensions/bazaar";
import fc from "fast-check";
import { type Hex, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expectJsonRpcAnswer,
  FUZZ_SEED,
  hostileArguments,
  hostileValue,
  jsonRpcBody,
  jsonRpcRequest,
  postJsonRpc,
  storedRows,
} from "../support/jsonRpcFuzz.ts";
import { expectSettledWithPayout, payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, officialPayment } from "../support/x402.ts";

/**
 * MCP at /mcp with the official clients against the running service on Anvil: the SDK 1.x
 * `Client` (2025 protocol, `initialize`) and the 2.x client negotiating 2026-07-28
 * (`server/discover`), the seven tools, a whole claim, a whole x402 payment in one call, bad
 * inputs, and the conformance tool's server scenarios.
 */

let stack: Stack;
let mcpUrl: URL;

const TOOLS = [
  "attach_payment_tx",
  "create_claim",
  "earn_with_x402",
  "get_claim",
  "get_ledger",
  "get_offer",
  "get_receipt",
];

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A", RATE_LIMIT_ENABLED: "false" } });
  mcpUrl = new URL(`${stack.service.url.replace("127.0.0.1", "localhost")}/mcp`);
});

afterAll(async () => {
  await stack?.stop();
});

async function clientV1() {
  const client = new Client({ name: "mcp-test-v1", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl));
  return client;
}

/** The 2.x client's result, with the fields this file reads. */
async function callV2(client: ClientV2, params: Parameters<ClientV2["callTool"]>[0]) {
  return (await client.callTool(params)) as ToolResult;
}

async function clientV2() {
  const client = new ClientV2(
    { name: "mcp-test-v2", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  await client.connect(new TransportV2(mcpUrl));
  return client;
}

type ToolResult = {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content?: { type: string; text?: string }[];
  _meta?: Record<string, unknown>;
};

/** A raw JSON-RPC POST to /mcp (for what no client would send). */
async function rawPost(body: string, headers: Record<string, string> = {}) {
  const response = await fetch(mcpUrl, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body,
  });
  const text = await response.text();
  const json = text.startsWith("{") ? JSON.parse(text) : text;
  return { status: response.status, body: json, headers: response.headers };
}

/** A POST to /mcp with a Host header of the test's choosing. */
function postWithHost(body: string, host: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const call = request(
      mcpUrl,
      {
        method: "POST",
        headers: {
          host,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
      },
      (response) => {
        let text = "";
        response.on("data", (chunk) => {
          text += chunk;
        });
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            body: text.startsWith("{") ? JSON.parse(text) : text,
          }),
        );
      },
    );
    call.on("error", reject);
    call.end(body);
  });
}

describe("MCP with the SDK 1.x client (2025-11-25)", () => {
  it("lists exactly the seven tools, with schemas and annotations", async () => {
    const client = await clientV1();
    expect(client.getServerVersion()?.name).toBe("pay-and-earn");
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(TOOLS);
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    for (const read of ["get_offer", "get_claim", "get_receipt", "get_ledger"]) {
      expect(byName.get(read)?.annotations).toMatchObject({ readOnlyHint: true });
    }
    expect(byName.get("create_claim")?.annotations).toMatchObject({ readOnlyHint: false });
    expect(byName.get("attach_payment_tx")?.annotations).toMatchObject({ idempotentHint: true });
    // The schemas are the REST ones: create_claim needs payout_address, takes nothing unknown.
    expect(byName.get("create_claim")?.inputSchema).toMatchObject({
      type: "object",
      required: ["payout_address"],
      additionalProperties: false,
    });
    expect(byName.get("get_claim")?.outputSchema).toMatchObject({ type: "object" });
    await client.close();
  });

  it("runs a whole claim: create, pay on Anvil, get_claim until completed, a receipt that verifies", async () => {
    const client = await clientV1();
    const payer = stack.chain.user(1);
    const created = (await client.callTool({
      name: "create_claim",
      arguments: { payout_address: payer.address, agent_name: "mcp-v1" },
    })) as ToolResult;
    expect(created.isError).toBeFalsy();
    const claim = created.structuredContent as { claim_id: string; amount_due_usdc: string };
    expect(claim.claim_id).toMatch(/^clm_/);
    expect(JSON.parse(created.content?.[0]?.text ?? "{}")).toEqual(created.structuredContent);

    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, atomic(claim.amount_due_usdc));
    await stack.mine(3);
    const completed = await waitFor(
      async () => {
        const read = (await client.callTool({
          name: "get_claim",
          arguments: { claim_id: claim.claim_id },
        })) as ToolResult;
        return read.structuredContent?.status === "completed" ? read.structuredContent : undefined;
      },
      { what: "the claim to complete over MCP" },
    );
    expect(completed.payout_tx).toMatch(/^0x[0-9a-f]{64}$/);

    const receipt = (await client.callTool({
      name: "get_receipt",
      arguments: { claim_id: claim.claim_id },
    })) as ToolResult;
    const { message, signature, signer } = receipt.structuredContent as {
      message: string;
      signature: Hex;
      signer: Hex;
    };
    expect(await verifyMessage({ address: signer, message, signature })).toBe(true);
    expect(signer).toBe(stack.service.config.receipts.signer);

    const ledger = (await client.callTool({
      name: "get_ledger",
      arguments: { agent_name: "mcp-v1", limit: 5 },
    })) as ToolResult;
    expect(ledger.structuredContent?.entries).toEqual([
      expect.objectContaining({ claim_id: claim.claim_id, agent_name: "mcp-v1" }),
    ]);
    await client.close();
  });

  it("pays and earns in one call with earn_with_x402: settles, pays out, answers with the receipt", async () => {
    const client = await clientV1();
    const payer = stack.chain.user(2);
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const unpaid = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
    })) as ToolResult;
    expect(unpaid.isError).toBe(true);
    const terms = unpaid.structuredContent as unknown as PaymentRequired;
    expect(terms.x402Version).toBe(2);
    expect(terms.accepts[0]).toMatchObject({
      amount: "10000000",
      payTo: stack.chain.payTo.address,
    });
    expect(terms.resource.url).toBe(`${stack.service.config.http.publicUrl}/mcp#earn_with_x402`);
    expect(terms.extensions).toHaveProperty("bazaar.info.input.type", "mcp");
    expect(terms.extensions).toHaveProperty("bazaar.info.input.toolName", "earn_with_x402");
    expect(
      validateDiscoveryExtension((terms.extensions as { bazaar: DiscoveryExtension }).bazaar),
    ).toEqual({ valid: true });
    const wrapped = JSON.parse(unpaid.content?.[0]?.text ?? "{}");
    expect(wrapped["x402/error"]).toMatchObject({ code: 402, data: { x402Version: 2 } });

    const payment = await officialPayment(payer.privateKey, terms);
    const paid = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": payment },
    })) as ToolResult;
    expect(paid.isError).toBeFalsy();
    const answer = paid.structuredContent as {
      claim_id: string;
      payout_tx: string;
      receipt: { message: string; signature: Hex; signer: Hex };
    };
    expect(answer.payout_tx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(
      await verifyMessage({
        address: answer.receipt.signer,
        message: answer.receipt.message,
        signature: answer.receipt.signature,
      }),
    ).toBe(true);
    expect(paid._meta?.["x402/payment-response"]).toMatchObject({
      success: true,
      network: "eip155:8453",
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    await expectSettledWithPayout(
      stack.chain,
      settlementOf(paid, answer.payout_tx),
      payer.address,
      payout,
    );
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(1);

    // The same payment again: the first answer, never a second payout.
    const replay = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": payment },
    })) as ToolResult;
    expect(replay.structuredContent?.claim_id).toBe(answer.claim_id);
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(1);
    await client.close();
  });

  it("answers bad inputs with isError results carrying the REST reason codes", async () => {
    const client = await clientV1();
    const invalid = (await client.callTool({
      name: "create_claim",
      arguments: { payout_address: "0x976EA74026E726554dB657fA54763abd0C3a0aA9" },
    })) as ToolResult;
    expect(invalid.isError).toBe(true);
    expect(invalid.structuredContent?.error).toMatchObject({
      code: "invalid_request",
      status: 400,
      errors: [{ field: "payout_address", message: expect.stringContaining("checksum") }],
    });

    const unknown = (await client.callTool({
      name: "get_claim",
      arguments: { claim_id: "clm_AAAAAAAAAAAAAAAAAAAAAA" },
    })) as ToolResult;
    expect(unknown.isError).toBe(true);
    expect(unknown.structuredContent?.error).toMatchObject({
      code: "claim_not_found",
      status: 404,
    });

    const notReady = (await client.callTool({
      name: "create_claim",
      arguments: { payout_address: stack.chain.user(3).address },
    })) as ToolResult;
    const receipt = (await client.callTool({
      name: "get_receipt",
      arguments: { claim_id: notReady.structuredContent?.claim_id },
    })) as ToolResult;
    expect(receipt.structuredContent?.error).toMatchObject({
      code: "receipt_not_ready",
      claim_status: "awaiting_payment",
    });

    const badLedger = (await client.callTool({
      name: "get_ledger",
      arguments: { limit: 1000 },
    })) as ToolResult;
    expect(badLedger.structuredContent?.error).toMatchObject({ code: "invalid_request" });

    const missing = (await client.callTool({ name: "get_claim", arguments: {} })) as ToolResult;
    expect(missing.structuredContent?.error).toMatchObject({
      code: "invalid_request",
      errors: [{ field: "claim_id", message: "is required" }],
    });
    await client.close();
  });

  it("refuses a payment that is not ours (wrong amount, or not a payment): nothing moves", async () => {
    const client = await clientV1();
    const payer = stack.chain.user(4);
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const unpaid = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
    })) as ToolResult;
    const terms = unpaid.structuredContent as unknown as PaymentRequired;
    const claimsBefore = await stack.claimCount();
    const wrongAmount = decodePaymentSignatureHeader(
      await handSignedPayment(privateKeyToAccount(payer.privateKey), terms.accepts[0] as never, {
        accepted: { amount: "1000000" },
      }),
    );
    const refused = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": wrongAmount },
    })) as ToolResult;
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ x402Version: 2, reason: "amount_mismatch" });

    const garbage = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": { hello: "world" } },
    })) as ToolResult;
    expect(garbage.isError).toBe(true);
    expect(garbage.structuredContent?.reason).toBeTypeOf("string");

    // An invalid payout address is refused before any payment is asked for.
    const invalid = (await client.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: "0x123" },
    })) as ToolResult;
    expect(invalid.structuredContent?.error).toMatchObject({ code: "invalid_request" });

    expect(await stack.claimCount()).toBe(claimsBefore);
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(0);
    await client.close();
  });
});

/**
 * The PaymentRequired where x402's own MCP client looks for it (specs/transports-v2/mcp.md):
 * `content[0].text` as `{"x402/error": {code: 402, data}}` of an `isError` result.
 */
/** The transaction a paid call's payment response names, which must be its payout's too. */
function settlementOf(paid: ToolResult, payoutTx: string): Hex {
  const response = paid._meta?.["x402/payment-response"] as { transaction: Hex };
  expect(response.transaction).toBe(payoutTx);
  return response.transaction;
}

function paymentRequiredAsX402Reads(result: ToolResult): PaymentRequired {
  expect(result.isError).toBe(true);
  const first = result.content?.[0];
  expect(first?.type).toBe("text");
  const wrapped = JSON.parse(first?.text ?? "{}") as {
    "x402/error"?: { code: number; message: string; data: PaymentRequired };
  };
  expect(wrapped["x402/error"]).toMatchObject({ code: 402, message: expect.any(String) });
  const data = wrapped["x402/error"]?.data as PaymentRequired;
  // The same terms as structuredContent, for clients that read that.
  expect(result.structuredContent).toMatchObject(data as unknown as Record<string, unknown>);
  return data;
}

/** The x402 client side (as @x402/fetch builds it) with the spend cap raised to the price. */
function x402PayingClient(privateKey: Hex) {
  return x402Client.fromConfig({
    schemes: [
      { network: "eip155:8453", client: new ExactEvmScheme(privateKeyToAccount(privateKey)) },
    ],
    spendControls: { maxAmountPerPayment: "$10" },
  });
}

/**
 * Every tool, answered and refused, through a client that has listed the tools first: the SDK
 * 1.x client then checks every result's structuredContent against the tool's outputSchema,
 * refusals included, and throws McpError -32602 on a mismatch instead of handing it over.
 */
describe.each([
  ["1.x", "v1"],
  ["2.x", "v2"],
] as const)("every tool after tools/list with the SDK %s client", (_major, which) => {
  async function listedClient() {
    const client = which === "v1" ? await clientV1() : await clientV2();
    await client.listTools();
    const call = async (params: {
      name: string;
      arguments?: Record<string, unknown>;
      _meta?: Record<string, unknown>;
    }) => (await client.callTool(params as never)) as ToolResult;
    return { call, close: () => client.close() };
  }

  it("hands over every refusal as an isError result with its reason code", async () => {
    const { call, close } = await listedClient();
    const refusals: [string, Record<string, unknown>, string][] = [
      ["get_offer", { extra: 1 }, "invalid_request"],
      ["create_claim", { payout_address: "0x123" }, "invalid_request"],
      ["get_claim", { claim_id: "clm_AAAAAAAAAAAAAAAAAAAAAA" }, "claim_not_found"],
      [
        "attach_payment_tx",
        { claim_id: "clm_AAAAAAAAAAAAAAAAAAAAAA", tx_hash: `0x${"ab".repeat(32)}` },
        "claim_not_found",
      ],
      ["get_receipt", { claim_id: "clm_AAAAAAAAAAAAAAAAAAAAAA" }, "claim_not_found"],
      ["get_ledger", { limit: 1000 }, "invalid_request"],
      ["earn_with_x402", { payout_address: "0x123" }, "invalid_request"],
    ];
    for (const [name, args, code] of refusals) {
      const refused = await call({ name, arguments: args });
      expect(refused.isError, name).toBe(true);
      expect(refused.structuredContent?.error, name).toMatchObject({ code });
      expect(refused.content?.[0]?.text, name).toContain(code);
    }
    await close();
  });

  it("answers every tool, and pays earn_with_x402 from the PaymentRequired as x402's client reads it", async () => {
    const { call, close } = await listedClient();
    const payer = stack.chain.user(which === "v1" ? 0 : 3);
    const offer = await call({ name: "get_offer", arguments: {} });
    expect(offer.isError).toBeFalsy();

    const created = await call({
      name: "create_claim",
      arguments: { payout_address: payer.address, agent_name: `listed-${which}` },
    });
    expect(created.isError).toBeFalsy();
    const claim = created.structuredContent as { claim_id: string; amount_due_usdc: string };
    const early = await call({ name: "get_receipt", arguments: { claim_id: claim.claim_id } });
    expect(early.structuredContent?.error).toMatchObject({ code: "receipt_not_ready" });
    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, atomic(claim.amount_due_usdc));
    await stack.mine(3);
    await waitFor(
      async () => {
        const read = await call({ name: "get_claim", arguments: { claim_id: claim.claim_id } });
        return read.structuredContent?.status === "completed" ? true : undefined;
      },
      { what: "the claim to complete through a client that listed the tools" },
    );
    const receipt = await call({ name: "get_receipt", arguments: { claim_id: claim.claim_id } });
    expect(receipt.isError).toBeFalsy();
    const ledger = await call({ name: "get_ledger", arguments: { agent_name: `listed-${which}` } });
    expect(ledger.structuredContent?.entries).toHaveLength(1);

    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const unpaid = await call({ name: "earn_with_x402", arguments: { payout_address: payout } });
    const terms = paymentRequiredAsX402Reads(unpaid);
    const payment = await x402PayingClient(payer.privateKey).createPaymentPayload(terms);
    const paid = await call({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": payment },
    });
    expect(paid.isError).toBeFalsy();
    const answer = paid.structuredContent as {
      payout_tx: string;
      receipt: { message: string; signature: Hex; signer: Hex };
    };
    expect(answer.payout_tx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await verifyMessage({ ...answer.receipt, address: answer.receipt.signer })).toBe(true);
    expect(paid._meta?.["x402/payment-response"]).toMatchObject({
      success: true,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    await expectSettledWithPayout(
      stack.chain,
      settlementOf(paid, answer.payout_tx),
      payer.address,
      payout,
    );
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(1);

    // A refused payment is PaymentRequired again, with the reason, still readable.
    const wrongAmount = decodePaymentSignatureHeader(
      await handSignedPayment(privateKeyToAccount(payer.privateKey), terms.accepts[0] as never, {
        accepted: { amount: "1000000" },
      }),
    );
    const refused = await call({
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": wrongAmount },
    });
    expect(paymentRequiredAsX402Reads(refused).x402Version).toBe(2);
    expect(refused.structuredContent?.reason).toBe("amount_mismatch");
    await close();
  });
});

describe("MCP with the SDK 2.x client (2026-07-28)", () => {
  it("negotiates the modern era, lists the seven tools and runs a whole claim", async () => {
    const client = await clientV2();
    expect(client.getProtocolEra()).toBe("modern");
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(TOOLS);

    const payer = stack.chain.user(5);
    const created = await callV2(client, {
      name: "create_claim",
      arguments: { payout_address: payer.address },
    });
    const claim = created.structuredContent as { claim_id: string; amount_due_usdc: string };
    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, atomic(claim.amount_due_usdc));
    await stack.mine(3);
    await waitFor(
      async () => {
        const read = await callV2(client, {
          name: "get_claim",
          arguments: { claim_id: claim.claim_id },
        });
        return read.structuredContent?.status === "completed" ? true : undefined;
      },
      { what: "the claim to complete over MCP 2026-07-28" },
    );
    const receipt = await callV2(client, {
      name: "get_receipt",
      arguments: { claim_id: claim.claim_id },
    });
    const { message, signature, signer } = receipt.structuredContent as {
      message: string;
      signature: Hex;
      signer: Hex;
    };
    expect(await verifyMessage({ address: signer, message, signature })).toBe(true);
    await client.close();
  });

  it("pays and earns with earn_with_x402 in the modern era, and refuses bad input cleanly", async () => {
    const client = await clientV2();
    const payer = stack.chain.user(6);
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const unpaid = await callV2(client, {
      name: "earn_with_x402",
      arguments: { payout_address: payout },
    });
    expect(unpaid.isError).toBe(true);
    const payment = await officialPayment(
      payer.privateKey,
      unpaid.structuredContent as unknown as PaymentRequired,
    );
    const paid = await callV2(client, {
      name: "earn_with_x402",
      arguments: { payout_address: payout },
      _meta: { "x402/payment": payment },
    });
    expect(paid.isError).toBeFalsy();
    expect(paid.structuredContent?.payout_tx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(paid._meta?.["x402/payment-response"]).toMatchObject({ success: true });
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(1);

    const invalid = await callV2(client, {
      name: "create_claim",
      arguments: { payout_address: "not an address" },
    });
    expect(invalid.isError).toBe(true);
    expect(invalid.structuredContent?.error).toMatchObject({ code: "invalid_request" });
    const unknown = await callV2(client, {
      name: "get_receipt",
      arguments: { claim_id: "clm_doesnotexist000000000" },
    });
    expect(unknown.structuredContent?.error).toMatchObject({ code: "claim_not_found" });
    await client.close();
  });
});

describe("MCP transport rules and hostile input", () => {
  const initialize = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-11-25",
      capabilities: {},
      clientInfo: { name: "raw", version: "1" },
    },
  });

  it("refuses a foreign Host or Origin with 403, and serves the public host and localhost", async () => {
    // fetch sets Host itself: node:http sends the one a rebinding attacker's page would carry.
    const foreignHost = await postWithHost(initialize, "evil.example");
    expect(foreignHost.status).toBe(403);
    expect(foreignHost.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
    const publicHost = await postWithHost(initialize, mcpUrl.host);
    expect(publicHost.status).toBe(200);
    const foreignOrigin = await rawPost(initialize, { origin: "http://evil.example" });
    expect(foreignOrigin.status).toBe(403);
    const local = await rawPost(initialize, { origin: mcpUrl.origin });
    expect(local.status).toBe(200);
  });

  it("answers other methods with 405, malformed JSON with a parse error, never a 5xx", async () => {
    const get = await fetch(mcpUrl, { headers: { accept: "text/event-stream" } });
    expect(get.status).toBe(405);
    await get.body?.cancel();

    const malformed = await rawPost("{ not json");
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });

    const notJsonRpc = await rawPost(JSON.stringify({ hello: "world" }));
    expect(notJsonRpc.status).toBeGreaterThanOrEqual(400);
    expect(notJsonRpc.status).toBeLessThan(500);

    const oversized = await rawPost(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "create_claim", arguments: { agent_name: "x".repeat(20_000) } },
      }),
    );
    expect(oversized.status).toBe(413);
    expect(oversized.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32600 } });
  });

  it("answers unknown methods and tools as JSON-RPC errors", async () => {
    const client = await clientV1();
    await expect(client.callTool({ name: "drain_wallet", arguments: {} })).rejects.toMatchObject({
      code: -32602,
    });
    await client.close();

    const unknownMethod = await rawPost(
      JSON.stringify({ jsonrpc: "2.0", id: 3, method: "wallet/drain", params: {} }),
    );
    expect(unknownMethod.status).toBeLessThan(500);
    const body = unknownMethod.body as { error?: { code: number } } | string;
    const parsed = typeof body === "string" ? JSON.parse(body.split("data: ")[1] ?? "{}") : body;
    expect(parsed.error?.code).toBe(-32601);
  });
});

describe("hostile JSON-RPC at /mcp (seeded fuzz)", () => {
  const TOOL_FIELDS = [
    "payout_address",
    "tx_hash",
    "email",
    "agent_name",
    "claim_id",
    "signature",
    "limit",
    "cursor",
    "since",
    "until",
  ];
  const toolName = fc.oneof(
    { arbitrary: fc.constantFrom(...TOOLS), weight: 4 },
    {
      arbitrary: fc.constantFrom("drain_wallet", "__proto__", "toString", "", "GET_OFFER"),
      weight: 1,
    },
    { arbitrary: hostileValue, weight: 1 },
  );
  const toolCall = fc.record(
    {
      name: toolName,
      arguments: hostileArguments(TOOL_FIELDS),
      _meta: fc.record(
        { "x402/payment": hostileValue, progressToken: hostileValue },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["name"] },
  );
  const method = fc.oneof(
    { arbitrary: fc.constant("tools/call"), weight: 6 },
    {
      arbitrary: fc.constantFrom(
        "tools/list",
        "initialize",
        "ping",
        "server/discover",
        "resources/list",
        "prompts/get",
        "logging/setLevel",
        "notifications/initialized",
        "notifications/cancelled",
        "completion/complete",
        "rpc.discover",
        "__proto__",
      ),
      weight: 3,
    },
  );
  const params = fc.oneof(
    { arbitrary: toolCall, weight: 5 },
    {
      arbitrary: fc.record(
        {
          protocolVersion: fc.oneof(
            fc.constantFrom("2025-11-25", "2026-07-28", "1999-01-01"),
            hostileValue,
          ),
          capabilities: hostileValue,
          clientInfo: hostileValue,
          cursor: hostileValue,
        },
        { requiredKeys: [] },
      ),
      weight: 1,
    },
  );
  const headers = fc.record(
    {
      accept: fc.constantFrom(
        "application/json, text/event-stream",
        "application/json, text/event-stream",
        "application/json",
        "text/event-stream",
        "*/*",
      ),
      "mcp-protocol-version": fc.oneof(
        fc.constantFrom("2025-11-25", "2025-06-18", "2026-07-28"),
        fc.string({ unit: "grapheme-ascii", maxLength: 20 }),
      ),
      "content-type": fc.constantFrom("application/json", "application/json", "text/plain"),
    },
    { requiredKeys: ["accept"] },
  );

  it("answers every request in JSON-RPC (an error, or a tool's isError result), never a 5xx or a hang; stores nothing", async () => {
    const before = await storedRows(stack.service.sql);
    await fc.assert(
      fc.asyncProperty(
        jsonRpcBody(jsonRpcRequest(method, params), ["tools/call", "initialize", "tools/list"]),
        headers,
        async (body, extra) => {
          const reply = await postJsonRpc(mcpUrl.href, body, extra);
          expectJsonRpcAnswer(reply);
          for (const message of reply.messages) {
            const result = message.result as ToolResult | undefined;
            if (result?.isError) {
              // A model reads the refusal: text it can read, and the refusal's stable code.
              expect(result.content?.[0]?.text, JSON.stringify(result)).toEqual(expect.any(String));
            }
          }
        },
      ),
      { numRuns: 150, seed: FUZZ_SEED },
    );
    // Nothing fuzzed names a valid payout address: no claim, no x402 record, no task.
    expect(await storedRows(stack.service.sql)).toEqual(before);
  });
});

describe("the MCP conformance tool", () => {
  it.each(["server-initialize", "ping", "tools-list", "dns-rebinding-protection"])(
    "passes %s",
    async (scenario) => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [
          "node_modules/@modelcontextprotocol/conformance/dist/index.js",
          "server",
          "--url",
          mcpUrl.href,
          "--scenario",
          scenario,
        ],
        { timeout: 60_000 },
      ).catch((error: { stdout?: string; stderr?: string }) => {
        throw new Error(`conformance ${scenario} failed:\n${error.stdout}\n${error.stderr}`);
      });
      expect(stdout).not.toMatch(/FAILURE/);
      // A scenario that checked nothing (skipped, or not run against us) passes nothing either.
      const [, passed, total, failed] = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(stdout) ?? [];
      expect(Number(passed), stdout).toBeGreaterThan(0);
      expect(passed).toBe(total);
      expect(failed).toBe("0");
    },
    90_000,
  );
});
