import {
  type CallToolResult,
  McpServer,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/server";
import { decodePaymentResponseHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { z } from "zod";
import { claimView } from "../claims/claimView.ts";
import { paidAnswerView, pendingAnswerView, withWebhookSecret } from "../claims/earnAnswerView.ts";
import type { Core } from "../core/createCore.ts";
import { ledgerPageView } from "../ledger/ledgerView.ts";
import { invalidRequest } from "../reasons/refusal.ts";
import { receiptView } from "../receipts/receiptView.ts";
import { parseInput } from "../schemas/parseInput.ts";
import { currentClient } from "../web/requestClient.ts";
import { toolAnswer, toolPaymentRequired, toolRefusal } from "./toolResults.ts";
import { claimIdArgument, TOOL_SCHEMAS, type ToolName } from "./toolSchemas.ts";

/** The 2026-07-28 revision (served per request through `server/discover`) and the 2025 ones. */
export const MCP_PROTOCOL_VERSIONS = ["2026-07-28", ...SUPPORTED_PROTOCOL_VERSIONS];

type Arguments = Record<string, unknown>;

interface ToolDefinition {
  title: string;
  description: string;
  annotations: { readOnlyHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
  run(args: Arguments, meta: Record<string, unknown> | undefined): Promise<CallToolResult>;
}

const READ = { readOnlyHint: true, idempotentHint: true, openWorldHint: false };

/**
 * The service's tools, each calling the same use-case as its REST route and answering with the
 * same view (`structuredContent`) or the same reason code (`isError`).
 */
function toolDefinitions(core: Core): Record<ToolName, ToolDefinition> {
  const { config } = core;
  const verifyUrl = `${config.http.publicUrl}/api/receipts/verify`;

  /** The tools naming a claim: `claim_id` as text (an unknown or malformed one is not found). */
  async function withClaimId(
    args: Arguments,
    then: (claimId: string, rest: Arguments) => Promise<CallToolResult>,
  ): Promise<CallToolResult> {
    const parsed = parseInput(claimIdArgument, args);
    if (!parsed.ok) return toolRefusal(invalidRequest(parsed.errors));
    const { claim_id: claimId, ...rest } = parsed.value;
    return then(claimId, rest);
  }

  return {
    get_offer: {
      title: "The offer",
      description:
        "What this service sells and how to pay: price (10 USDC) and payout (1 USDC) on Base, " +
        "the USDC contract, pay_to, the steps of the claim flow, x402 details, the receipt signer.",
      annotations: READ,
      async run(args) {
        const parsed = parseInput(TOOL_SCHEMAS_EMPTY, args);
        if (!parsed.ok) return toolRefusal(invalidRequest(parsed.errors));
        return toolAnswer(core.offer);
      },
    },
    create_claim: {
      title: "Create a claim",
      description:
        "Start the claim flow: give the payout_address that gets 1 USDC. The answer says what " +
        "to pay (amount_due_usdc, unique to the claim) to pay_to on Base; once the transfer " +
        "confirms, the claim completes with payout_tx and a signed receipt. Unprofitable by " +
        "design: pay 10, receive 1. No refunds.",
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: true },
      async run(args) {
        const result = await core.createClaim(args, { client: currentClient() });
        if (result.type !== "created") return toolRefusal(result);
        const view = claimView(config, result.claim);
        return toolAnswer({
          ...view,
          amount: view.payment_instructions?.amount_usdc ?? view.amount_due_usdc,
          ...(result.webhookSecret ? { webhook_secret: result.webhookSecret } : {}),
        });
      },
    },
    get_claim: {
      title: "Read a claim",
      description:
        "A claim's status (awaiting_payment, paid, paying, completed, failed, expired), the " +
        "payment matched, the payout transaction, and what to pay while it awaits payment.",
      annotations: READ,
      run: (args) =>
        withClaimId(args, async (claimId, rest) => {
          if (Object.keys(rest).length > 0) return unknownFields(rest);
          const result = await core.getClaim(claimId);
          if (result.type !== "claim") return toolRefusal(result);
          return toolAnswer(claimView(config, result.claim));
        }),
    },
    attach_payment_tx: {
      title: "Name the payment transaction",
      description:
        "Name the transaction (tx_hash) that paid a claim, e.g. when another wallet paid. It " +
        "must be a transfer that qualifies for the claim; it pays once confirmed.",
      annotations: { readOnlyHint: false, idempotentHint: true, openWorldHint: true },
      run: (args) =>
        withClaimId(args, async (claimId, rest) => {
          const result = await core.attachTx(claimId, rest);
          if (result.type !== "attached") return toolRefusal(result);
          return toolAnswer({
            ...claimView(config, result.claim),
            attached_tx: { tx_hash: result.txHash, state: result.state },
          });
        }),
    },
    get_receipt: {
      title: "The signed receipt",
      description:
        "The EIP-191 receipt of a completed claim (message, signature, signer); check it with " +
        "viem's verifyMessage. Refused with receipt_not_ready until the claim is completed.",
      annotations: READ,
      run: (args) =>
        withClaimId(args, async (claimId, rest) => {
          if (Object.keys(rest).length > 0) return unknownFields(rest);
          const result = await core.getReceipt(claimId);
          if (result.type !== "receipt") return toolRefusal(result);
          return toolAnswer(receiptView(result.receipt, verifyUrl));
        }),
    },
    get_ledger: {
      title: "The public ledger",
      description:
        "Completed payouts, newest first, in pages (limit, cursor = next_cursor), filtered by " +
        "agent_name, since, until.",
      annotations: READ,
      async run(args) {
        const result = await core.listLedger(args);
        if (result.type !== "page") return toolRefusal(result);
        return toolAnswer(ledgerPageView(config, result.query, result.page));
      },
    },
    earn_with_x402: {
      title: "Pay and earn in one call (x402)",
      description:
        "Pay 10 USDC with x402 v2 (scheme exact, Base USDC) and get 1 USDC back in the same " +
        "call. Without a payment the tool answers with the x402 PaymentRequired; sign it and " +
        'call again with the PaymentPayload in _meta["x402/payment"]. The payment is settled ' +
        "first, then paid out; the answer has claim_id, payout_tx, the receipt, and the " +
        'settlement in _meta["x402/payment-response"]. A payment is used once, on any transport.',
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: true },
      async run(args, meta) {
        const result = await core.earnWithX402(args, paymentSignature(meta?.["x402/payment"]));
        switch (result.type) {
          case "payment_required":
            return toolPaymentRequired(await core.paymentRequiredForMcp(result.paymentRequired));
          case "payment_refused":
            return toolPaymentRequired(
              await core.paymentRequiredForMcp(result.paymentRequired),
              result.reason,
            );
          case "settlement_unknown":
            return toolAnswer(
              withWebhookSecret(pendingAnswerView(config, result.claim), result.webhookSecret),
            );
          case "paid":
            return toolAnswer(
              withWebhookSecret(
                paidAnswerView(config, result.claim, result.receipt),
                result.webhookSecret,
              ),
              result.paymentResponse
                ? { "x402/payment-response": decodePaymentResponseHeader(result.paymentResponse) }
                : undefined,
            );
          default:
            return toolRefusal(result);
        }
      },
    },
  };
}

/** get_offer takes no arguments. */
const TOOL_SCHEMAS_EMPTY = z.strictObject({});

function unknownFields(rest: Arguments): CallToolResult {
  return toolRefusal(
    invalidRequest([{ field: "", message: `unknown field(s): ${Object.keys(rest).join(", ")}` }]),
  );
}

/**
 * `_meta["x402/payment"]` as the PAYMENT-SIGNATURE the core reads: the PaymentPayload object
 * (the transport spec), or already encoded. Anything else is passed on as it is and refused
 * there as an unreadable payment, never taken for no payment at all.
 */
function paymentSignature(payment: unknown): string | undefined {
  if (payment === undefined || payment === null) return undefined;
  if (typeof payment === "string") return payment;
  try {
    return encodePaymentSignatureHeader(payment as PaymentPayload);
  } catch {
    return "not-a-payment";
  }
}

/**
 * A fresh server for one request (stateless serving: nothing is shared between requests or
 * clients), with the seven tools.
 */
export function createMcpServer(core: Core): McpServer {
  const server = new McpServer(
    { name: core.config.serviceName, title: "Pay and earn", version: "1.0.0" },
    {
      capabilities: { tools: {} },
      supportedProtocolVersions: MCP_PROTOCOL_VERSIONS,
      instructions:
        "Pay 10 USDC on Base and get 1 USDC back plus an EIP-191 signed receipt. One call: " +
        "earn_with_x402 (x402 payment). Or create_claim, pay the amount it names to pay_to, " +
        "poll get_claim until completed, then get_receipt. get_offer has every detail.",
    },
  );
  for (const [name, tool] of Object.entries(toolDefinitions(core)) as [
    ToolName,
    ToolDefinition,
  ][]) {
    server.registerTool(
      name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: TOOL_SCHEMAS[name].input,
        outputSchema: TOOL_SCHEMAS[name].output,
        annotations: { title: tool.title, ...tool.annotations },
      },
      (args: Arguments, context) => tool.run(args ?? {}, context.mcpReq._meta),
    );
  }
  return server;
}
