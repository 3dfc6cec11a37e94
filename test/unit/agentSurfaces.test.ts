import { type Message, type Part, Role } from "@a2a-js/sdk";
import type { Request } from "express";
import { describe, expect, it } from "vitest";
import { readRequest } from "../../api/a2a/agentExecutor.ts";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { ConfigError } from "../../api/config/settings.ts";
import { TOOL_SCHEMAS } from "../../api/mcp/toolSchemas.ts";
import { allowedAgentHosts } from "../../api/web/middleware/agentHosts.ts";
import { routeClass } from "../../api/web/middleware/rateLimit.ts";

/** The pure parts of the agent surfaces: rate-limit classes, sentences, hosts, tool schemas. */

const post = (path: string, body: unknown) => ({ method: "POST", path, body }) as Request;
const call = (name: string) => ({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name, arguments: {} },
});

describe("rate-limit classes of agent calls", () => {
  it("counts MCP tools that create claims or pay as writes, the rest as reads", () => {
    for (const name of ["create_claim", "attach_payment_tx", "earn_with_x402"]) {
      expect(routeClass(post("/mcp", call(name)))).toBe("write");
    }
    for (const name of ["get_offer", "get_claim", "get_receipt", "get_ledger"]) {
      expect(routeClass(post("/mcp", call(name)))).toBe("read");
    }
    expect(routeClass(post("/mcp", { jsonrpc: "2.0", id: 1, method: "initialize" }))).toBe("read");
    expect(routeClass(post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }))).toBe("read");
    // A batch with one write in it is a write; so is what cannot be read.
    expect(routeClass(post("/mcp", [call("get_offer"), call("earn_with_x402")]))).toBe("write");
    expect(routeClass(post("/mcp", "garbage"))).toBe("write");
  });

  it("counts A2A messages and cancels as writes, task reads as reads (1.0 and 0.3 names)", () => {
    for (const method of ["SendMessage", "CancelTask", "message/send", "tasks/cancel"]) {
      expect(routeClass(post("/a2a", { jsonrpc: "2.0", id: 1, method }))).toBe("write");
    }
    for (const method of ["GetTask", "ListTasks", "tasks/get"]) {
      expect(routeClass(post("/a2a", { jsonrpc: "2.0", id: 1, method }))).toBe("read");
    }
  });
});

const text = (value: string): Part => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});
const data = (value: unknown): Part => ({
  content: { $case: "data", value },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});
const message = (parts: Part[], metadata?: Record<string, unknown>): Message => ({
  messageId: "m",
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts,
  metadata,
  extensions: [],
  referenceTaskIds: [],
});
const address = "0x976EA74026E726554dB657fA54763abd0C3a0aa9";

describe("what an A2A message asks for", () => {
  it("reads a data part's skill and arguments (create_claim by default)", () => {
    expect(readRequest(message([data({ payout_address: address })]))).toEqual({
      skill: "create_claim",
      args: { payout_address: address },
    });
    expect(readRequest(message([data({ skill: "get_claim", claim_id: "clm_x" })]))).toEqual({
      skill: "get_claim",
      args: { claim_id: "clm_x" },
    });
    expect(readRequest(message([data({ skill: "drain" })]))).toMatchObject({
      type: "invalid_request",
      errors: [{ field: "skill" }],
    });
  });

  it("reads a sentence: the address as written, x402 when it says so", () => {
    expect(readRequest(message([text(`earn 1 USDC to ${address} please`)]))).toEqual({
      skill: "create_claim",
      args: { payout_address: address },
    });
    expect(readRequest(message([text(`pay with x402, payout to ${address}`)]))).toMatchObject({
      skill: "earn_with_x402",
    });
    // A malformed address is passed on as written, for the core to say what is wrong with it.
    expect(readRequest(message([text("earn 1 USDC to 0x123")]))).toEqual({
      skill: "create_claim",
      args: { payout_address: "0x123" },
    });
    expect(readRequest(message([text("pay me")]))).toMatchObject({
      type: "invalid_request",
      errors: [{ field: "payout_address" }],
    });
    expect(readRequest(message([text("what is your offer?")]))).toEqual({
      skill: "get_offer",
      args: {},
    });
  });

  it("takes a message carrying an x402 payload for the x402 skill", () => {
    const paying = message([text(`to ${address}`)], { "x402.payment.payload": {} });
    expect(readRequest(paying)).toMatchObject({ skill: "earn_with_x402" });
  });
});

const env = {
  RPC_URL: "http://127.0.0.1:8545",
  DATABASE_URL: "postgres://postgres@127.0.0.1:5432/test",
  PAY_TO: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  PAYOUT_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  RECEIPT_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  FACILITATOR_PRIVATE_KEY: `0x${"33".repeat(32)}`,
};

describe("the hosts /mcp and /a2a answer to", () => {
  it("are PUBLIC_URL's, localhost and AGENT_ALLOWED_HOSTS", () => {
    const config = parseServiceConfig({
      ...env,
      PUBLIC_URL: "https://Pay.Example.com",
      METRICS_TOKEN: "a-metrics-token-of-sixteen-plus",
      AGENT_ALLOWED_HOSTS: "internal-lb.local, [::1]",
    });
    expect([...allowedAgentHosts(config)].sort()).toEqual(
      ["127.0.0.1", "::1", "[::1]", "internal-lb.local", "localhost", "pay.example.com"].sort(),
    );
  });

  it("refuses a setting that is not host names", () => {
    expect(() => parseServiceConfig({ ...env, AGENT_ALLOWED_HOSTS: "https://x.example/" })).toThrow(
      ConfigError,
    );
  });
});

describe("the MCP tool schemas", () => {
  it("are the REST schemas as JSON Schema, objects without a dialect tag", () => {
    for (const [name, schemas] of Object.entries(TOOL_SCHEMAS)) {
      const input = schemas.input["~standard"].jsonSchema.input({ target: "draft-2020-12" });
      const output = schemas.output["~standard"].jsonSchema.output({ target: "draft-2020-12" });
      expect(input, name).toMatchObject({ type: "object" });
      expect(output, name).toMatchObject({ type: "object" });
      expect(input, name).not.toHaveProperty("$schema");
    }
    const create = TOOL_SCHEMAS.create_claim.input["~standard"].jsonSchema.input({
      target: "draft-2020-12",
    });
    expect(create).toMatchObject({
      required: ["payout_address"],
      properties: { payout_address: { type: "string" }, email: { type: "string" } },
    });
  });
});
