import type { StandardSchemaWithJSON } from "@modelcontextprotocol/server";
import { z } from "zod";
import {
  attachTxRequest,
  claimIdInput,
  createClaimRequest,
  x402EarnRequest,
} from "../schemas/inputs.ts";
import { ledgerQuery, ledgerResponse } from "../schemas/ledger.ts";
import {
  attachedClaimResponse,
  claimResponse,
  createdClaimResponse,
  offerResponse,
  receiptResponse,
  x402PaidResponse,
  x402PendingResponse,
} from "../schemas/responses.ts";

type Json = Record<string, unknown>;

/** A REST schema as JSON Schema 2020-12, without `$schema` (MCP clients need no dialect tag). */
function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): Json {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as Json;
  return json;
}

/**
 * A tool's schema as the SDK wants it (Standard Schema with JSON), built from the REST zod
 * schema but validating nothing: the arguments go to the core as they came, and the core's
 * checks answer with the same reason codes and words as REST (`invalid_request` with one error
 * per field). The SDK's own validation would word them its way.
 */
function described(json: Json): StandardSchemaWithJSON<Json> {
  return {
    "~standard": {
      version: 1,
      vendor: "pay-and-earn",
      validate: (value) => ({ value: value as Json }),
      jsonSchema: { input: () => json, output: () => json },
    },
  };
}

const claimIdArguments = z.strictObject({ claim_id: claimIdInput });

/**
 * A refusal's `structuredContent` (`toolRefusal`): the REST reason code, status, title and
 * words, and the reason's own fields.
 */
const toolRefusalContent = z.strictObject({
  error: z.looseObject({
    code: z.string(),
    status: z.number().int(),
    title: z.string(),
    detail: z.string().optional(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
    retry_after_seconds: z.number().int().optional(),
  }),
});

/** The unpaid or refused `earn_with_x402`'s `structuredContent`: x402's PaymentRequired. */
const paymentRequiredContent = z.looseObject({
  x402Version: z.literal(2),
  error: z.string().optional(),
  resource: z.looseObject({ url: z.string() }),
  accepts: z.array(z.looseObject({ scheme: z.string(), network: z.string(), amount: z.string() })),
  extensions: z.record(z.string(), z.unknown()).optional(),
  reason: z.string().optional(),
});

/**
 * A tool's declared output: its answers and its refusals. The MCP spec has structured results
 * conform to the output schema, and the SDK 1.x `Client` checks `structuredContent` against it
 * on `isError` results too (it throws McpError -32602 instead of handing the result over), so
 * every shape a tool answers with is declared, refusals and x402's PaymentRequired included.
 */
function output(...answers: z.ZodType[]): StandardSchemaWithJSON<Json> {
  return described({
    type: "object",
    anyOf: [...answers, toolRefusalContent].map((answer) => jsonSchemaOf(answer, "output")),
  });
}

/** The input and output schemas of each tool, from the REST request and response schemas. */
export const TOOL_SCHEMAS = {
  get_offer: {
    input: described(jsonSchemaOf(z.strictObject({}), "input")),
    output: output(offerResponse),
  },
  create_claim: {
    input: described(jsonSchemaOf(createClaimRequest, "input")),
    output: output(createdClaimResponse),
  },
  get_claim: {
    input: described(jsonSchemaOf(claimIdArguments, "input")),
    output: output(claimResponse),
  },
  attach_payment_tx: {
    input: described(jsonSchemaOf(attachTxRequest.extend(claimIdArguments.shape), "input")),
    output: output(attachedClaimResponse),
  },
  get_receipt: {
    input: described(jsonSchemaOf(claimIdArguments, "input")),
    output: output(receiptResponse),
  },
  get_ledger: {
    input: described(jsonSchemaOf(ledgerQuery, "input")),
    output: output(ledgerResponse),
  },
  earn_with_x402: {
    input: described(jsonSchemaOf(x402EarnRequest, "input")),
    // Paid (with the receipt, or without it while the payout is unmined), recorded with its
    // settlement's outcome unknown, or the PaymentRequired (unpaid, or the payment refused).
    output: output(x402PaidResponse, x402PendingResponse, paymentRequiredContent),
  },
} as const;

export type ToolName = keyof typeof TOOL_SCHEMAS;

/** The arguments of the tools that name a claim: `claim_id` as text, the rest for the core. */
export const claimIdArgument = z.looseObject({
  claim_id: z.string({ message: "must be a string" }),
});
