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

/** The input and output schemas of each tool, from the REST request and response schemas. */
export const TOOL_SCHEMAS = {
  get_offer: {
    input: described(jsonSchemaOf(z.strictObject({}), "input")),
    output: described(jsonSchemaOf(offerResponse, "output")),
  },
  create_claim: {
    input: described(jsonSchemaOf(createClaimRequest, "input")),
    output: described(jsonSchemaOf(createdClaimResponse, "output")),
  },
  get_claim: {
    input: described(jsonSchemaOf(claimIdArguments, "input")),
    output: described(jsonSchemaOf(claimResponse, "output")),
  },
  attach_payment_tx: {
    input: described(jsonSchemaOf(attachTxRequest.extend(claimIdArguments.shape), "input")),
    output: described(jsonSchemaOf(attachedClaimResponse, "output")),
  },
  get_receipt: {
    input: described(jsonSchemaOf(claimIdArguments, "input")),
    output: described(jsonSchemaOf(receiptResponse, "output")),
  },
  get_ledger: {
    input: described(jsonSchemaOf(ledgerQuery, "input")),
    output: described(jsonSchemaOf(ledgerResponse, "output")),
  },
  earn_with_x402: {
    input: described(jsonSchemaOf(x402EarnRequest, "input")),
    // Paid (with the receipt, or without it while the payout is unmined), or recorded with its
    // settlement's outcome unknown.
    output: described({
      type: "object",
      anyOf: [
        jsonSchemaOf(x402PaidResponse, "output"),
        jsonSchemaOf(x402PendingResponse, "output"),
      ],
    }),
  },
} as const;

export type ToolName = keyof typeof TOOL_SCHEMAS;

/** The arguments of the tools that name a claim: `claim_id` as text, the rest for the core. */
export const claimIdArgument = z.looseObject({
  claim_id: z.string({ message: "must be a string" }),
});
