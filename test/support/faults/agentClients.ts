import { type Message, type Part, Role, type Task } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import type { Address } from "viem";

/**
 * The agent surfaces as the fault stream's clients use them, through the official SDK clients:
 * one call each, against one replica. A connection the service drops throws; the caller decides
 * whether to try another replica.
 */

type ToolAnswer = {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
};

async function withMcp<T>(url: string, use: (client: McpClient) => Promise<T>): Promise<T> {
  const client = new McpClient({ name: "fault-suite", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  try {
    return await use(client);
  } finally {
    await client.close().catch(() => {});
  }
}

/** MCP `earn_with_x402` without a payment: the terms to sign (an isError result, by the x402 MCP transport). */
export function mcpEarnTerms(url: string, payoutAddress: Address): Promise<PaymentRequired> {
  return withMcp(url, async (client) => {
    const answer = (await client.callTool(
      { name: "earn_with_x402", arguments: { payout_address: payoutAddress } },
      undefined,
      { timeout: 20_000 },
    )) as ToolAnswer;
    const terms = answer.structuredContent as PaymentRequired | undefined;
    if (!answer.isError || terms?.x402Version !== 2) {
      throw new Error(`earn_with_x402 unpaid answered ${JSON.stringify(answer).slice(0, 200)}`);
    }
    return terms;
  });
}

/**
 * MCP `earn_with_x402` with the payment in `_meta`: the claim it paid, and what the client saw
 * (`mcp paid`, or the refusal's stable code).
 */
export function mcpEarnPaid(
  url: string,
  payoutAddress: Address,
  payment: PaymentPayload,
): Promise<{ claimId?: string; outcome: string }> {
  return withMcp(url, async (client) => {
    const answer = (await client.callTool(
      {
        name: "earn_with_x402",
        arguments: { payout_address: payoutAddress },
        _meta: { "x402/payment": payment },
      },
      undefined,
      { timeout: 30_000 },
    )) as ToolAnswer;
    const content = answer.structuredContent ?? {};
    const claimId = typeof content.claim_id === "string" ? content.claim_id : undefined;
    if (!answer.isError) return { claimId, outcome: "mcp paid" };
    // A refusal carries `error.code`; x402's payment-required answer its `reason` (or the SDK's
    // own `error` text).
    const { error, reason } = content as { error?: { code?: string } | string; reason?: string };
    const code = typeof error === "object" ? error.code : (reason ?? error);
    return { claimId, outcome: `mcp ${code ?? "error"}` };
  });
}

const dataPart = (data: Record<string, unknown>): Part => ({
  content: { $case: "data", value: data },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

/** A2A `create_claim` as a task: the claim the task follows and the amount it asks for. */
export async function a2aCreateClaim(
  url: string,
  payoutAddress: Address,
  agentName: string,
): Promise<{ claimId: string; due: string }> {
  const client = await new ClientFactory().createFromUrl(url);
  const message: Message = {
    messageId: crypto.randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      dataPart({ skill: "create_claim", payout_address: payoutAddress, agent_name: agentName }),
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  const result = (await client.sendMessage({ message } as never)) as Task | Message;
  const task = "status" in result ? result : undefined;
  const part = task?.status?.message?.parts.find((one) => one.content?.$case === "data");
  const data =
    part?.content?.$case === "data" ? (part.content.value as Record<string, unknown>) : {};
  const { claim_id: claimId, amount_due_usdc: due } = data;
  if (typeof claimId !== "string" || typeof due !== "string") {
    throw new Error(`A2A create_claim answered ${JSON.stringify(result).slice(0, 200)}`);
  }
  return { claimId, due };
}
