import { type Message, type Part, type Task, TaskState } from "@a2a-js/sdk";
import { type Client, ClientFactory } from "@a2a-js/sdk/client";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { decodePaymentSignatureHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import fc from "fast-check";
import { type Address, type Hex, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SKILLS } from "../../api/a2a/agentExecutor.ts";
import { dataPart, textPart, userMessage } from "../support/a2aMessages.ts";
import {
  expectJsonRpcAnswer,
  FUZZ_SEED,
  hostileArguments,
  hostileValue,
  jsonRpcBody,
  jsonRpcRequest,
  notAnAddress,
  postJsonRpc,
  storedRows,
} from "../support/jsonRpcFuzz.ts";
import { expectSettledWithPayout, payoutTransfersTo } from "../support/payouts.ts";
import { startTestService } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, officialPayment, paymentTerms } from "../support/x402.ts";

/**
 * A2A at /a2a with the official SDK client on Anvil (card, claim task, x402 inside a task,
 * cancel, list, 0.3 and header-less requests, bad input), and one record per payment across
 * HTTP x402, MCP and A2A, counted from the chain's logs.
 */

let stack: Stack;
let client: Client;
let mcp: McpClient;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A", RATE_LIMIT_ENABLED: "false" } });
  client = await new ClientFactory().createFromUrl(stack.service.url);
  mcp = new McpClient({ name: "cross-transport", version: "1.0.0" });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${stack.service.url}/mcp`)));
});

afterAll(async () => {
  await mcp?.close();
  await stack?.stop();
});

async function send(parts: Part[], extra: Partial<Message> = {}): Promise<Task | Message> {
  return (await client.sendMessage({ message: userMessage(parts, extra) } as never)) as
    | Task
    | Message;
}

function asTask(result: Task | Message): Task {
  if (!("status" in result)) throw new Error(`expected a task, got ${JSON.stringify(result)}`);
  return result;
}

/** The data part of a task's status message. */
function statusData(task: Task): Record<string, unknown> | undefined {
  const part = task.status?.message?.parts.find((one) => one.content?.$case === "data");
  return part?.content?.$case === "data" ? part.content.value : undefined;
}

async function untilTaskState(id: string, state: TaskState): Promise<Task> {
  return waitFor(
    async () => {
      const task = await client.getTask({ id } as never);
      return task.status?.state === state ? task : undefined;
    },
    { what: `task ${id} to be ${TaskState[state]}` },
  );
}

/** The parts of a raw JSON-RPC answer these tests read (1.0 and 0.3 shapes). */
interface RpcAnswer {
  jsonrpc?: string;
  error?: { code: number; message: string };
  result?: {
    task?: { id: string; status?: { state: string } };
    kind?: string;
    id?: string;
    status?: { state: string };
  };
}

async function rpc(body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${stack.service.url}/a2a`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as RpcAnswer };
}

describe("A2A with the official client", () => {
  it("reads the agent card: JSON-RPC at /a2a, the skills, the x402 extension, the signer", async () => {
    const card = await client.getAgentCard();
    expect(card.name).toBe("pay-and-earn");
    expect(card.supportedInterfaces).toContainEqual(
      expect.objectContaining({
        url: `${stack.service.config.http.publicUrl}/a2a`,
        protocolBinding: "JSONRPC",
        protocolVersion: "1.0",
      }),
    );
    expect(card.skills.map((skill) => skill.id).sort()).toEqual([
      "attach_payment_tx",
      "create_claim",
      "earn_with_x402",
      "get_claim",
      "get_ledger",
      "get_offer",
      "get_receipt",
    ]);
    expect(card.capabilities?.extensions).toContainEqual(
      expect.objectContaining({
        uri: "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2",
      }),
    );
    expect(card.description).toContain(stack.service.config.receipts.signer);
  });

  it("runs a claim as a task: input-required with what to pay, then completed with the receipt", async () => {
    const payer = stack.chain.user(1);
    const task = asTask(
      await send([
        dataPart({ skill: "create_claim", payout_address: payer.address, agent_name: "a2a" }),
      ]),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const claim = statusData(task) as { claim_id: string; amount_due_usdc: string };
    expect(claim.claim_id).toMatch(/^clm_/);
    expect(task.metadata?.claim_id).toBe(claim.claim_id);

    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, atomic(claim.amount_due_usdc));
    await stack.mine(3);
    const done = await untilTaskState(task.id, TaskState.TASK_STATE_COMPLETED);
    const receipt = done.artifacts[0]?.parts[0]?.content;
    expect(receipt?.$case).toBe("data");
    const { message, signature, signer } = (receipt as { value: Record<string, string> }).value as {
      message: string;
      signature: Hex;
      signer: Hex;
    };
    expect(await verifyMessage({ address: signer, message, signature })).toBe(true);

    // The task is in PostgreSQL: listed within its context, with the claim's final state.
    const listed = await client.listTasks({
      contextId: task.contextId,
      status: TaskState.TASK_STATE_UNSPECIFIED,
      includeArtifacts: true,
    } as never);
    expect(listed.tasks.map((one) => one.id)).toEqual([task.id]);
    expect(listed.tasks[0]?.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

    // Done is done: canceling a completed task is refused.
    await expect(client.cancelTask({ id: task.id } as never)).rejects.toThrow();
  });

  it("understands a sentence, and cancels a task while it is unpaid", async () => {
    const task = asTask(await send([textPart(`earn 1 USDC to ${stack.chain.user(2).address}`)]));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const canceled = await client.cancelTask({ id: task.id } as never);
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await client.getTask({ id: task.id } as never)).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });

  it("pays inside the task with the x402 extension: settled first, completed with the receipt", async () => {
    const payer = stack.chain.user(3);
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const task = asTask(
      await send([dataPart({ skill: "earn_with_x402", payout_address: payout })]),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const metadata = task.status?.message?.metadata ?? {};
    expect(metadata["x402.payment.status"]).toBe("payment-required");
    const terms = metadata["x402.payment.required"] as PaymentRequired;
    expect(terms.accepts[0]).toMatchObject({
      amount: "10000000",
      payTo: stack.chain.payTo.address,
    });

    const payment = await officialPayment(payer.privateKey, terms);
    const paid = asTask(
      await send([textPart("Here is the payment.")], {
        taskId: task.id,
        contextId: task.contextId,
        metadata: { "x402.payment.status": "payment-submitted", "x402.payment.payload": payment },
      }),
    );
    expect(paid.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const paidMetadata = paid.status?.message?.metadata ?? {};
    expect(paidMetadata["x402.payment.status"]).toBe("payment-completed");
    expect(paidMetadata["x402.payment.receipts"]).toEqual([
      expect.objectContaining({ success: true, network: "eip155:8453" }),
    ]);
    // Settled and paid out in one transaction (docs/payments.md#one-transaction-settlement).
    const [settlement] = paidMetadata["x402.payment.receipts"] as { transaction: Hex }[];
    await expectSettledWithPayout(
      stack.chain,
      settlement?.transaction as Hex,
      payer.address,
      payout,
    );
    expect(paid.artifacts[0]?.name).toBe("receipt");
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(1);
    const fetched = await client.getTask({ id: task.id } as never);
    expect(fetched.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("answers bad input with a rejected task or an error, never a payout", async () => {
    const noAddress = asTask(await send([textPart("please pay me")]));
    expect(noAddress.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(statusData(noAddress)?.error).toMatchObject({
      code: "invalid_request",
      errors: [{ field: "payout_address" }],
    });

    const badChecksum = asTask(
      await send([textPart("earn 1 USDC to 0x976EA74026E726554dB657fA54763abd0C3a0aA9")]),
    );
    expect(badChecksum.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(statusData(badChecksum)?.error).toMatchObject({
      code: "invalid_request",
      errors: [{ field: "payout_address", message: expect.stringContaining("checksum") }],
    });

    const unknownClaim = (await send([
      dataPart({ skill: "get_claim", claim_id: "clm_AAAAAAAAAAAAAAAAAAAAAA" }),
    ])) as Message;
    const error = unknownClaim.parts.find((part) => part.content?.$case === "data");
    expect(error?.content?.$case === "data" && error.content.value.error).toMatchObject({
      code: "claim_not_found",
    });

    // A refused payment (not 10 USDC): the task fails with the reason; nothing moves.
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const task = asTask(
      await send([dataPart({ skill: "earn_with_x402", payout_address: payout })]),
    );
    const terms = task.status?.message?.metadata?.["x402.payment.required"] as PaymentRequired;
    const wrong = decodePaymentSignatureHeader(
      await handSignedPayment(
        privateKeyToAccount(stack.chain.user(4).privateKey),
        terms.accepts[0] as never,
        {
          accepted: { amount: "1000000" },
        },
      ),
    );
    const refused = asTask(
      await send([textPart("pay")], {
        taskId: task.id,
        contextId: task.contextId,
        metadata: { "x402.payment.status": "payment-submitted", "x402.payment.payload": wrong },
      }),
    );
    expect(refused.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(refused.status?.message?.metadata).toMatchObject({
      "x402.payment.status": "payment-failed",
      "x402.payment.error": "amount_mismatch",
    });
    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(0);

    await expect(
      client.listTasks({ status: TaskState.TASK_STATE_UNSPECIFIED } as never),
    ).rejects.toThrow(/contextId/);
  });
});

describe("A2A on the wire", () => {
  it("serves SendMessage without an A2A-Version header, and 0.3 method names", async () => {
    const modern = await rpc({
      jsonrpc: "2.0",
      id: 1,
      method: "SendMessage",
      params: {
        message: {
          messageId: crypto.randomUUID(),
          role: "ROLE_USER",
          parts: [{ text: `earn 1 USDC to ${stack.chain.user(5).address}` }],
        },
      },
    });
    expect(modern.status).toBe(200);
    const taskId = modern.body.result?.task?.id as string;
    expect(modern.body.result?.task?.status?.state).toBe("TASK_STATE_INPUT_REQUIRED");

    const legacy = await rpc({
      jsonrpc: "2.0",
      id: 2,
      method: "message/send",
      params: {
        message: {
          kind: "message",
          messageId: crypto.randomUUID(),
          role: "user",
          parts: [{ kind: "text", text: `earn 1 USDC to ${stack.chain.user(5).address}` }],
        },
      },
    });
    expect(legacy.status).toBe(200);
    expect(legacy.body.result).toMatchObject({ kind: "task", status: { state: "input-required" } });

    const got = await rpc({ jsonrpc: "2.0", id: 3, method: "tasks/get", params: { id: taskId } });
    expect(got.body.result).toMatchObject({ id: taskId, kind: "task" });
  });

  it("answers malformed JSON, unknown methods and a foreign Origin as JSON-RPC errors", async () => {
    const malformed = await rpc("{ nope");
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 } });
    const unknown = await rpc({ jsonrpc: "2.0", id: 4, method: "DrainWallet", params: {} });
    expect(unknown.status).toBeLessThan(500);
    expect(unknown.body.error?.code).toBe(-32601);
    const foreign = await rpc(
      { jsonrpc: "2.0", id: 5, method: "GetTask", params: { id: "x" } },
      { origin: "https://evil.example" },
    );
    expect(foreign.status).toBe(403);
    const oversized = await rpc({
      jsonrpc: "2.0",
      id: 6,
      method: "SendMessage",
      params: { pad: "x".repeat(20_000) },
    });
    expect(oversized.status).toBe(413);
    expect(oversized.body.error?.code).toBe(-32600);
  });
});

describe("one record per payment across HTTP x402, MCP and A2A", () => {
  const earnUrl = () => `${stack.service.url}/api/x402/earn`;

  async function payOverHttp(header: string, payoutAddress: Address) {
    const response = await fetch(earnUrl(), {
      method: "POST",
      headers: { "content-type": "application/json", "payment-signature": header },
      body: JSON.stringify({ payout_address: payoutAddress }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  async function payOverMcp(payment: PaymentPayload, payoutAddress: Address) {
    return (await mcp.callTool({
      name: "earn_with_x402",
      arguments: { payout_address: payoutAddress },
      _meta: { "x402/payment": payment },
    })) as { isError?: boolean; structuredContent?: Record<string, unknown> };
  }

  async function payOverA2a(payment: PaymentPayload, payoutAddress: Address): Promise<Task> {
    const task = asTask(
      await send([dataPart({ skill: "earn_with_x402", payout_address: payoutAddress })]),
    );
    return asTask(
      await send([textPart("payment")], {
        taskId: task.id,
        contextId: task.contextId,
        metadata: { "x402.payment.status": "payment-submitted", "x402.payment.payload": payment },
      }),
    );
  }

  it("an authorization paid over HTTP is replayed, never paid again, on MCP and A2A", async () => {
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const terms = await paymentTerms(earnUrl(), { payout_address: payout });
    const header = await handSignedPayment(
      privateKeyToAccount(stack.chain.user(6).privateKey),
      terms.accepts[0] as never,
    );
    const http = await payOverHttp(header, payout);
    expect(http.status).toBe(200);
    const payment = decodePaymentSignatureHeader(header);

    const overMcp = await payOverMcp(payment, payout);
    expect(overMcp.structuredContent?.claim_id).toBe(http.body.claim_id);
    const overA2a = await payOverA2a(payment, payout);
    expect(overA2a.metadata?.claim_id).toBe(http.body.claim_id);

    // A mismatched copy (same authorization, other payload bytes) is refused on every transport.
    const signed = payment.payload as { authorization: { validBefore: string } };
    const altered = {
      ...payment,
      payload: {
        ...signed,
        authorization: {
          ...signed.authorization,
          validBefore: String(BigInt(signed.authorization.validBefore) + 1n),
        },
      },
    };
    const mismatched = await payOverMcp(altered as PaymentPayload, payout);
    expect(mismatched.isError).toBe(true);
    expect(mismatched.structuredContent?.reason).toBe("nonce_already_used");
    const mismatchedHttp = await payOverHttp(
      encodePaymentSignatureHeader(altered as PaymentPayload),
      payout,
    );
    expect(mismatchedHttp.status).toBe(402);

    expect(await payoutTransfersTo(stack.chain, payout)).toHaveLength(1);
  });

  it("an authorization paid over A2A is replayed on HTTP and MCP; its transfer pays no open claim", async () => {
    const payer = stack.chain.user(0);
    // An open claim of the payer's own address: the x402 settlement must never pay it.
    const open = (await mcp.callTool({
      name: "create_claim",
      arguments: { payout_address: payer.address },
    })) as { structuredContent?: { claim_id: string } };
    const openId = open.structuredContent?.claim_id as string;

    const terms = await paymentTerms(earnUrl(), { payout_address: payer.address });
    const payment = await officialPayment(payer.privateKey, terms);
    const overA2a = await payOverA2a(payment, payer.address);
    expect(overA2a.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const claimId = overA2a.metadata?.claim_id;

    const http = await payOverHttp(encodePaymentSignatureHeader(payment), payer.address);
    expect(http.body.claim_id).toBe(claimId);
    const overMcp = await payOverMcp(payment, payer.address);
    expect(overMcp.structuredContent?.claim_id).toBe(claimId);

    // Past the confirmations, the matcher has seen the settlement transfer: it paid the x402
    // claim, not the open one.
    const settled = (http.body.payment as { tx_hash: string }).tx_hash;
    await stack.mine(3);
    await stack.untilTransferState(settled, "paid_claim");
    const still = await stack.api(`/api/claims/${openId}`);
    expect(still.body.status).toBe("awaiting_payment");
    expect(await payoutTransfersTo(stack.chain, payer.address)).toHaveLength(1);
  });
});

describe("tasks across replicas, a proxy in front, and cancel rules", () => {
  let replica: Awaited<ReturnType<typeof startTestService>>;

  beforeAll(async () => {
    // A second API replica on the same database, named by its public URL behind a proxy.
    replica = await startTestService(stack.chain, stack.database.url, {
      ROLE: "api",
      PUBLIC_URL: "https://pay.example.com",
      METRICS_TOKEN: "a-metrics-token-of-sixteen-plus",
      TRUST_PROXY: "loopback",
      AGENT_ALLOWED_HOSTS: "internal-lb.local",
    });
  });

  afterAll(async () => {
    await replica?.stop();
  });

  it("serves a task created on one replica from another (tasks live in PostgreSQL)", async () => {
    const task = asTask(await send([textPart(`earn 1 USDC to ${stack.chain.user(5).address}`)]));
    const response = await fetch(`${replica.url}/a2a`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-host": "pay.example.com" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: task.id } }),
    });
    const body = (await response.json()) as RpcAnswer & { result?: { id?: string } };
    expect(response.status).toBe(200);
    expect(body.result).toMatchObject({
      id: task.id,
      status: { state: "TASK_STATE_INPUT_REQUIRED" },
    });
  });

  it("answers the public host behind a proxy, and the configured extra hosts; not others", async () => {
    const initialize = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "p", version: "1" },
      },
    });
    const post = (headers: Record<string, string>) =>
      fetch(`${replica.url}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: initialize,
      });
    const forwarded = await post({
      "x-forwarded-host": "pay.example.com",
      origin: "https://pay.example.com",
    });
    expect(forwarded.status).toBe(200);
    await forwarded.body?.cancel();
    expect((await post({ "x-forwarded-host": "internal-lb.local" })).status).toBe(200);
    const foreign = await post({ "x-forwarded-host": "evil.example" });
    expect(foreign.status).toBe(403);
    expect(
      (await post({ "x-forwarded-host": "pay.example.com", origin: "https://evil.example" }))
        .status,
    ).toBe(403);
    // The card names the public URL, and any page may read it (CORS).
    const cardResponse = await fetch(`${replica.url}/.well-known/agent-card.json`);
    expect(cardResponse.headers.get("access-control-allow-origin")).toBe("*");
    const card = (await cardResponse.json()) as { supportedInterfaces: { url: string }[] };
    expect(card.supportedInterfaces[0]?.url).toBe("https://pay.example.com/a2a");
  });

  it("refuses to cancel a task once its claim names a payment, then completes it", async () => {
    const payer = stack.chain.user(2);
    const task = asTask(
      await send([dataPart({ skill: "create_claim", payout_address: payer.address })]),
    );
    const claim = statusData(task) as { claim_id: string; amount_due_usdc: string };
    const hash = await stack.chain.transferUsdc(
      payer,
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    const named = asTask(
      await send([dataPart({ tx_hash: hash })], { taskId: task.id, contextId: task.contextId }),
    );
    expect(named.status?.state).toBe(TaskState.TASK_STATE_WORKING);
    await expect(client.cancelTask({ id: task.id } as never)).rejects.toThrow(/cancel/i);
    await stack.mine(3);
    await untilTaskState(task.id, TaskState.TASK_STATE_COMPLETED);
  });
});

describe("stored tasks are bounded", () => {
  let capped: Awaited<ReturnType<typeof startTestService>>;

  beforeAll(async () => {
    capped = await startTestService(stack.chain, stack.database.url, {
      ROLE: "api",
      RATE_LIMIT_ENABLED: "false",
      A2A_OPEN_TASKS_PER_CLIENT: "2",
    });
  });

  afterAll(async () => {
    await capped?.stop();
  });

  /** The stored row of a task, as the database holds it (null: not stored). */
  async function storedTask(id: string) {
    const [row] = await stack.service.sql<{ task: unknown; client: string | null }[]>`
      select task, client from app.a2a_tasks where id = ${id}`;
    return row ?? null;
  }

  async function sendTo(url: string, data: unknown) {
    const response = await fetch(`${url}/a2a`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: {
          message: {
            messageId: crypto.randomUUID(),
            role: "ROLE_USER",
            parts: [{ data }],
          },
        },
      }),
    });
    return (await response.json()) as {
      result?: { task?: { id: string; status?: { state: string; message?: unknown } } };
      error?: unknown;
    };
  }

  it("does not store a refused task: rejected, or its payment refused", async () => {
    const rejected = asTask(await send([textPart("please pay me")]));
    expect(rejected.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(await storedTask(rejected.id)).toBeNull();
    await expect(client.getTask({ id: rejected.id } as never)).rejects.toThrow();

    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const task = asTask(
      await send([dataPart({ skill: "earn_with_x402", payout_address: payout })]),
    );
    expect(await storedTask(task.id)).not.toBeNull();
    const terms = task.status?.message?.metadata?.["x402.payment.required"] as PaymentRequired;
    const wrong = decodePaymentSignatureHeader(
      await handSignedPayment(
        privateKeyToAccount(stack.chain.user(4).privateKey),
        terms.accepts[0] as never,
        { accepted: { amount: "1000000" } },
      ),
    );
    const refused = asTask(
      await send([textPart("pay")], {
        taskId: task.id,
        contextId: task.contextId,
        metadata: { "x402.payment.status": "payment-submitted", "x402.payment.payload": wrong },
      }),
    );
    expect(refused.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(await storedTask(task.id)).toBeNull();
  });

  it("keeps e-mail addresses out of the stored task", async () => {
    const email = `agent-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const claimTask = asTask(
      await send([
        dataPart({ payout_address: stack.chain.user(5).address, email }),
        textPart(`mail the receipt to ${email} please`),
      ]),
    );
    expect(claimTask.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const stored = await storedTask(claimTask.id);
    expect(stored).not.toBeNull();
    expect(JSON.stringify(stored?.task)).not.toContain(email);
    const read = await client.getTask({ id: claimTask.id } as never);
    expect(JSON.stringify(read)).not.toContain(email);

    // x402: the history never holds it; the request it waits to pay for does, until the claim.
    const payer = stack.chain.user(6);
    const payout = privateKeyToAccount(generatePrivateKey()).address;
    const unpaid = asTask(
      await send([dataPart({ skill: "earn_with_x402", payout_address: payout, email })]),
    );
    const waiting = await storedTask(unpaid.id);
    expect(JSON.stringify((waiting?.task as { history?: unknown })?.history)).not.toContain(email);
    const terms = unpaid.status?.message?.metadata?.["x402.payment.required"] as PaymentRequired;
    const paid = asTask(
      await send([textPart("pay")], {
        taskId: unpaid.id,
        contextId: unpaid.contextId,
        metadata: {
          "x402.payment.status": "payment-submitted",
          "x402.payment.payload": await officialPayment(payer.privateKey, terms),
        },
      }),
    );
    expect(paid.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(JSON.stringify((await storedTask(unpaid.id))?.task)).not.toContain(email);
  });

  it("caps the tasks one client holds waiting for a payment; they live an hour", async () => {
    const ask = () =>
      sendTo(capped.url, {
        skill: "earn_with_x402",
        payout_address: privateKeyToAccount(generatePrivateKey()).address,
      });
    // This client's earlier waiting tasks (other tests) count too: start from none.
    await stack.service.sql`delete from app.a2a_tasks where claim_id is null`;
    const first = await ask();
    const second = await ask();
    expect(first.result?.task?.status?.state).toBe("TASK_STATE_INPUT_REQUIRED");
    expect(second.result?.task?.status?.state).toBe("TASK_STATE_INPUT_REQUIRED");
    const third = await ask();
    expect(third.result?.task?.status?.state).toBe("TASK_STATE_REJECTED");
    expect(JSON.stringify(third.result?.task?.status?.message)).toContain("too_many_open_tasks");
    expect(await storedTask(third.result?.task?.id as string)).toBeNull();

    // An hour later (A2A_UNPAID_TASK_TTL_SECONDS) the waiting tasks are gone, and count no more.
    const firstId = first.result?.task?.id as string;
    await stack.service.sql`
      update app.a2a_tasks set updated_at = now() - interval '61 minutes' where claim_id is null`;
    await expect(client.getTask({ id: firstId } as never)).rejects.toThrow();
    const again = await ask();
    expect(again.result?.task?.status?.state).toBe("TASK_STATE_INPUT_REQUIRED");
  });

  it("holds the cap exactly when one client asks many times at once", async () => {
    // The attacker's way past a counted cap: ask in parallel, so every count sees room.
    await stack.service.sql`delete from app.a2a_tasks where claim_id is null`;
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        sendTo(capped.url, {
          skill: "earn_with_x402",
          payout_address: privateKeyToAccount(generatePrivateKey()).address,
        }),
      ),
    );
    const states = answers.map((answer) => answer.result?.task?.status?.state);
    expect(states.filter((state) => state === "TASK_STATE_INPUT_REQUIRED")).toHaveLength(2);
    expect(states.filter((state) => state === "TASK_STATE_REJECTED")).toHaveLength(10);
    const [stored] = await stack.service.sql<{ n: number }[]>`
      select count(*)::int as n from app.a2a_tasks where claim_id is null`;
    expect(stored?.n).toBe(2);
  });
});

describe("hostile JSON-RPC at /a2a (seeded fuzz)", () => {
  const SKILL_FIELDS = [
    "skill",
    "payout_address",
    "tx_hash",
    "email",
    "agent_name",
    "claim_id",
    "limit",
    "cursor",
  ];
  const skills = fc.constantFrom(...SKILLS, "drain_wallet", "__proto__");
  const skillData = fc.oneof(
    fc.record(
      {
        skill: skills,
        payout_address: notAnAddress,
        tx_hash: hostileValue,
        email: hostileValue,
        claim_id: hostileValue,
      },
      { requiredKeys: ["skill"] },
    ),
    hostileArguments(SKILL_FIELDS),
  );
  const sentence = fc.oneof(
    notAnAddress.map((address) => `earn 1 USDC to ${address}`),
    notAnAddress.map((address) => `pay with x402 to ${address} and mail a@b.co`),
    fc.constantFrom("what is the offer?", "how", ""),
    fc.string({ maxLength: 200 }),
  );
  // 1.0 parts (protobuf JSON), 0.3 parts (`kind`), and neither.
  const part = fc.oneof(
    skillData.map((data) => ({ data })),
    sentence.map((text) => ({ text })),
    skillData.map((data) => ({ kind: "data", data })),
    sentence.map((text) => ({ kind: "text", text })),
    fc.record(
      { url: hostileValue, mediaType: hostileValue, raw: hostileValue },
      { requiredKeys: [] },
    ),
    hostileValue,
  );
  const x402Metadata = fc.record(
    {
      "x402.payment.status": fc.oneof(
        fc.constantFrom("payment-submitted", "payment-rejected", "payment-required"),
        hostileValue,
      ),
      "x402.payment.payload": hostileValue,
    },
    { requiredKeys: [] },
  );
  const message = fc.record(
    {
      messageId: fc.oneof(fc.uuid(), hostileValue),
      role: fc.oneof(fc.constantFrom("ROLE_USER", "ROLE_AGENT", "user", "agent", 1), hostileValue),
      kind: fc.constant("message"),
      parts: fc.oneof(fc.array(part, { maxLength: 3 }), hostileValue),
      taskId: fc.oneof(fc.uuid(), hostileValue),
      contextId: hostileValue,
      metadata: fc.oneof(x402Metadata, hostileValue),
      extensions: hostileValue,
      referenceTaskIds: hostileValue,
    },
    { requiredKeys: ["messageId", "role", "parts"] },
  );
  const method = fc.constantFrom(
    "SendMessage",
    "SendMessage",
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "CancelTask",
    "ListTasks",
    "SubscribeToTask",
    "GetExtendedAgentCard",
    "CreateTaskPushNotificationConfig",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "wallet/drain",
  );
  const params = fc.oneof(
    {
      arbitrary: fc.record(
        { message, configuration: hostileValue, metadata: hostileValue },
        { requiredKeys: ["message"] },
      ),
      weight: 5,
    },
    {
      arbitrary: fc.record(
        {
          id: fc.oneof(fc.uuid(), hostileValue),
          historyLength: hostileValue,
          contextId: hostileValue,
          pageSize: hostileValue,
          pageToken: hostileValue,
          status: hostileValue,
        },
        { requiredKeys: [] },
      ),
      weight: 2,
    },
  );
  const headers = fc.record(
    {
      "a2a-version": fc.oneof(fc.constantFrom("1.0", "0.3", "2.0"), fc.string({ maxLength: 10 })),
      "content-type": fc.constantFrom("application/json", "application/json", "text/plain"),
    },
    { requiredKeys: [] },
  );

  it("answers every request as JSON-RPC, never a 5xx or a hang; stores nothing for what it refuses", async () => {
    const before = await storedRows(stack.service.sql);
    const payoutsBefore = (await payoutTransfersTo(stack.chain, stack.chain.user(6).address))
      .length;
    await fc.assert(
      fc.asyncProperty(
        jsonRpcBody(jsonRpcRequest(method, params), ["SendMessage", "message/send", "GetTask"]),
        headers,
        async (body, extra) => {
          expectJsonRpcAnswer(await postJsonRpc(`${stack.service.url}/a2a`, body, extra));
        },
      ),
      { numRuns: 150, seed: FUZZ_SEED },
    );
    // Nothing fuzzed names a valid payout address: every task was refused, none is kept.
    expect(await storedRows(stack.service.sql)).toEqual(before);
    expect(await payoutTransfersTo(stack.chain, stack.chain.user(6).address)).toHaveLength(
      payoutsBefore,
    );
  });
});
