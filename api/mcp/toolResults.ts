import type { CallToolResult } from "@modelcontextprotocol/server";
import type { PaymentRequired } from "@x402/core/types";
import type { PaymentRefusalReason } from "../reasons/reasonCatalog.ts";
import { describeRefusal, paymentRefusalWords, type Refusal } from "../reasons/refusal.ts";

/** A tool's answer: the view as `structuredContent`, and the same JSON as text for old clients. */
export function toolAnswer(structured: object, meta?: Record<string, unknown>): CallToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(structured) }],
    structuredContent: structured as Record<string, unknown>,
    ...(meta ? { _meta: meta } : {}),
  };
}

/**
 * A refusal as a tool error (`isError`, so a model can read it and correct itself): the REST
 * reason code, its status, title and words, and its fields (`errors` per field …) under
 * `error`, as the catalog gives them.
 */
export function toolRefusal(refusal: Refusal): CallToolResult {
  const described = describeRefusal(refusal);
  const error = {
    code: described.code,
    status: described.status,
    title: described.title,
    ...(described.detail !== undefined ? { detail: described.detail } : {}),
    ...described.fields,
    ...(described.retryAfterSeconds !== undefined
      ? { retry_after_seconds: described.retryAfterSeconds }
      : {}),
  };
  return {
    isError: true,
    content: [
      {
        type: "text",
        text: `${described.code}: ${described.title}.${described.detail ? ` ${described.detail}` : ""}`,
      },
    ],
    structuredContent: { error },
  };
}

/**
 * x402's "payment required" on MCP (specs/transports-v2/mcp.md): an `isError` result with the
 * `PaymentRequired` as `structuredContent` and, wrapped in `x402/error`, as `content[0].text`.
 * A refused payment says why (`reason`, a stable code) beside the SDK's own `error`.
 */
export function toolPaymentRequired(
  paymentRequired: PaymentRequired,
  refused?: PaymentRefusalReason,
): CallToolResult {
  const message = refused ? paymentRefusalWords(refused) : "Payment required";
  return {
    isError: true,
    content: [
      {
        type: "text",
        text: JSON.stringify({
          "x402/error": {
            code: 402,
            message,
            ...(refused ? { reason: refused } : {}),
            data: paymentRequired,
          },
        }),
      },
    ],
    structuredContent: {
      ...(paymentRequired as unknown as Record<string, unknown>),
      ...(refused ? { reason: refused } : {}),
    },
  };
}
