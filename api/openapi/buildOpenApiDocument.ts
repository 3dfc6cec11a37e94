import { z } from "zod";
import {
  createDocument,
  type ZodOpenApiOperationObject,
  type ZodOpenApiResponseObject,
} from "zod-openapi";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { claimEventEnvelope, EVENT_TYPE_NAMES, paymentEventEnvelope } from "../schemas/events.ts";
import { healthResponse } from "../schemas/health.ts";
import {
  attachTxRequest,
  createClaimRequest,
  txHashInput,
  verifyReceiptRequest,
  x402EarnRequest,
} from "../schemas/inputs.ts";
import { ledgerQuery, ledgerResponse } from "../schemas/ledger.ts";
import {
  attachedClaimResponse,
  claimResponse,
  createdClaimResponse,
  offerResponse,
  paymentExplanationResponse,
  problemResponse,
  receiptResponse,
  receiptVerdictResponse,
  x402DetailsResponse,
  x402PaidResponse,
  x402PaymentRequiredResponse,
  x402PendingResponse,
} from "../schemas/responses.ts";

/**
 * GET /openapi.json: OpenAPI 3.1.0, version 1.0.0, generated from the zod schemas that validate
 * the requests and type the responses. Every route and every status it can answer.
 */

const json = (schema: z.ZodType) => ({ content: { "application/json": { schema } } });
const problemJson = { content: { "application/problem+json": { schema: problemResponse } } };

function problem(description: string): ZodOpenApiResponseObject {
  return { description, ...problemJson };
}

const rateLimited: ZodOpenApiResponseObject = {
  description: "Too many requests from this client: wait Retry-After seconds (`rate_limited`).",
  headers: z.object({ "Retry-After": z.string() }),
  ...problemJson,
};

const htmlPage = { "text/html": { schema: z.string() } };

/** A page's "no": a page for people, problem+json for a client that asks for JSON. */
function pageProblem(description: string): ZodOpenApiResponseObject {
  return { description, content: { ...htmlPage, ...problemJson.content } };
}
const unavailable: ZodOpenApiResponseObject = {
  description:
    "A dependency is slow or unreachable (`temporarily_unavailable`): the database did not " +
    "finish in time, the chain's RPC did not answer, or, for requests that change something, " +
    "the rate limits cannot be counted. Retry after Retry-After seconds.",
  headers: z.object({ "Retry-After": z.string() }),
  ...problemJson,
};

/** Statuses every route can answer. */
const common = {
  "429": rateLimited,
  "500": problem("Unexpected failure (`internal_error`); the body carries a request_id."),
  "503": unavailable,
};

/** A route's own 503 as well as the one every route can answer. */
function alsoUnavailable(description: string): ZodOpenApiResponseObject {
  return { ...unavailable, description: `${description} Or: ${unavailable.description}` };
}
/** Statuses every route with a JSON body can answer, before its own validation. */
const jsonBodyErrors = {
  "413": problem("The body is larger than 16 kB (`body_too_large`)."),
  "415": problem("The body is not application/json (`unsupported_media_type`)."),
};

/** A JSON-RPC 2.0 message (MCP and A2A): its shape is the protocol's, not this API's. */
const jsonRpcMessage = z
  .looseObject({ jsonrpc: z.literal("2.0") })
  .meta({ description: "JSON-RPC 2.0 request, response or notification" });

function jsonRpcError(description: string): ZodOpenApiResponseObject {
  return {
    description,
    content: {
      "application/json": {
        schema: z.looseObject({
          jsonrpc: z.literal("2.0"),
          id: z.union([z.string(), z.number(), z.null()]),
          error: z.looseObject({ code: z.number().int(), message: z.string() }),
        }),
      },
    },
  };
}
/** A GraphQL response (GraphQL over HTTP): `data`, `errors`, or both. */
const graphqlResult = {
  content: {
    "application/json": { schema: z.looseObject({}) },
    "application/graphql-response+json": { schema: z.looseObject({}) },
  },
};

/** A path parameter that is not valid percent-encoded UTF-8 (`%E0%A4%A`, `%C0%AF`). */
const badPathEncoding = "The path is not valid percent-encoded UTF-8 (`bad_request`).";

const claimIdParam = {
  path: z.object({ claim_id: z.string().meta({ description: "The claim's id (clm_…)." }) }),
};

const operations: Record<string, Record<string, ZodOpenApiOperationObject>> = {
  "/api/info": {
    get: {
      operationId: "getOffer",
      summary: "The offer: what is sold, where and how to pay, endpoints, terms",
      responses: {
        "200": { description: "The offer document.", ...json(offerResponse) },
        ...common,
      },
    },
  },
  "/api/claims": {
    post: {
      operationId: "createClaim",
      summary: "Create a claim: where the 1 USDC payout goes",
      description:
        "Returns what to pay: in variant A a unique amount_due (payable from any wallet); in " +
        "variant B 10 USDC from the payout address, or from any wallet with tx_hash named.",
      requestBody: json(createClaimRequest),
      responses: {
        "200": {
          description:
            "The open claim asked for again (same payout_address, email and agent_name, no tx_hash), with at least an hour to live: given back rather than a second one.",
          headers: z.object({ Location: z.string() }),
          ...json(createdClaimResponse),
        },
        "201": {
          description:
            "Created, awaiting payment. In variant A, payment_instructions.unique_amount says whether it got a unique amount (when the amount space is busy it opens without one, paid from its payout address or by a named transaction).",
          headers: z.object({ Location: z.string() }),
          ...json(createdClaimResponse),
        },
        "400": problem("Malformed JSON or invalid fields (`invalid_request`, `malformed_json`)."),
        "409": problem("The tx_hash given is already used by another claim (`tx_already_used`)."),
        "422": problem("The tx_hash given does not qualify (`tx_not_qualifying`, with `reason`)."),
        ...jsonBodyErrors,
        ...common,
        "429": {
          ...rateLimited,
          description: `${rateLimited.description} Or the client already holds OPEN_CLAIMS_PER_CLIENT open unpaid claims (\`too_many_open_claims\`, with \`limit\`).`,
        },
      },
    },
  },
  "/api/claims/{claim_id}": {
    get: {
      operationId: "getClaim",
      summary: "A claim's status, its payment and payout, and what to pay while awaiting",
      requestParams: claimIdParam,
      responses: {
        "200": { description: "The claim.", ...json(claimResponse) },
        "400": problem(badPathEncoding),
        "404": problem("No such claim (`claim_not_found`)."),
        ...common,
      },
    },
  },
  "/api/claims/{claim_id}/events": {
    get: {
      operationId: "streamClaimEvents",
      summary: "The claim's events, live, as Server-Sent Events",
      description:
        "Each event has `id` (a number; send the last one received as Last-Event-ID to resume), " +
        "`event` (its type) and `data` (the envelope a webhook receives). The events so far come " +
        "first, then each as it happens. The stream ends after EVENT_STREAM_MAX_SECONDS; " +
        "EventSource reconnects and resumes by itself.",
      requestParams: {
        ...claimIdParam,
        header: z.object({
          "Last-Event-ID": z
            .string()
            .optional()
            .meta({ description: "The id of the last event received: resume after it." }),
        }),
      },
      responses: {
        "200": {
          description: "text/event-stream of the claim's event envelopes.",
          content: { "text/event-stream": { schema: z.string() } },
        },
        "400": problem(badPathEncoding),
        "404": problem("No such claim (`claim_not_found`)."),
        ...common,
        "429": {
          ...rateLimited,
          description: `${rateLimited.description} Or the client holds EVENT_STREAMS_PER_CLIENT streams already (\`too_many_streams\`).`,
        },
      },
    },
  },
  "/api/claims/{claim_id}/tx": {
    post: {
      operationId: "attachPaymentTx",
      summary: "Name the transaction that paid (or will pay) the claim",
      requestParams: claimIdParam,
      requestBody: json(attachTxRequest),
      responses: {
        "200": {
          description: "Attached; it paid the claim or will once confirmed.",
          ...json(attachedClaimResponse),
        },
        "202": {
          description: "Accepted: not mined yet; it pays the claim once it confirms.",
          ...json(attachedClaimResponse),
        },
        "400": problem(
          `Malformed JSON or an invalid hash (\`invalid_request\`). ${badPathEncoding}`,
        ),
        "404": problem("No such claim (`claim_not_found`)."),
        "409": problem(
          "Used by another claim (`tx_already_used`) or the claim is not open (`claim_not_open`).",
        ),
        "410": problem("The claim has expired (`claim_expired`)."),
        "422": problem("The transaction does not qualify (`tx_not_qualifying`, with `reason`)."),
        ...jsonBodyErrors,
        ...common,
      },
    },
  },
  "/api/claims/{claim_id}/receipt": {
    get: {
      operationId: "getReceipt",
      summary: "The EIP-191 signed receipt of a completed claim",
      requestParams: claimIdParam,
      responses: {
        "200": { description: "The receipt.", ...json(receiptResponse) },
        "400": problem(badPathEncoding),
        "404": problem("No such claim (`claim_not_found`)."),
        "409": problem("Not completed yet (`receipt_not_ready`, with `claim_status`)."),
        ...common,
      },
    },
  },
  "/api/receipts/verify": {
    post: {
      operationId: "verifyReceipt",
      summary: "Is a receipt genuine (signed by our key) and current (the one on record)?",
      requestBody: json(verifyReceiptRequest),
      responses: {
        "200": { description: "The verdict.", ...json(receiptVerdictResponse) },
        "400": problem("Malformed JSON or invalid fields (`invalid_request`)."),
        ...jsonBodyErrors,
        ...common,
      },
    },
  },
  "/api/payments/{tx_hash}": {
    get: {
      operationId: "explainPayment",
      summary: "What happened to my payment? Each transfer to pay_to in a transaction",
      requestParams: { path: z.object({ tx_hash: txHashInput }) },
      responses: {
        "200": {
          description: "The transfers and what each paid.",
          ...json(paymentExplanationResponse),
        },
        "400": problem(`Not a transaction hash (\`invalid_request\`). ${badPathEncoding}`),
        "404": problem("The chain does not know this transaction (`tx_not_found`)."),
        ...common,
      },
    },
  },
  "/api/ledger": {
    get: {
      operationId: "getLedger",
      summary: "Recent completed payouts, newest first, paged by cursor",
      requestParams: { query: ledgerQuery },
      responses: {
        "200": { description: "A page of the ledger.", ...json(ledgerResponse) },
        "400": problem("Invalid limit, cursor or filter (`invalid_request`)."),
        ...common,
      },
    },
  },
  "/api/x402/earn": {
    get: {
      operationId: "getX402Details",
      summary: "What an x402 client needs before paying (including the spend-cap note)",
      responses: {
        "200": { description: "The x402 details.", ...json(x402DetailsResponse) },
        ...common,
      },
    },
    post: {
      operationId: "payAndEarnWithX402",
      summary: "Pay 10 USDC with x402 v2 and get the payout and the receipt in one request",
      description:
        "Without PAYMENT-SIGNATURE: 402 with the terms in PAYMENT-REQUIRED. With it: the payment " +
        "is verified, recorded, settled, and only then paid out. If the payout is not mined " +
        "within a bounded wait, the 200 still carries payout_tx and status_url (receipt null) " +
        "and the receipt appears at the receipt route once the claim is completed. A replay of " +
        "the same payment returns the same claim; nothing is paid twice.",
      requestParams: {
        header: z.object({
          "payment-signature": z
            .string()
            .optional()
            .meta({ description: "x402 v2 payment payload, base64 JSON (the paid retry)." }),
        }),
      },
      requestBody: json(x402EarnRequest),
      responses: {
        "200": {
          description: "Paid: settled and paid out.",
          headers: z.object({
            "PAYMENT-RESPONSE": z.string().meta({ description: "The settlement, base64 JSON." }),
          }),
          ...json(x402PaidResponse),
        },
        "202": {
          description: "The settlement's outcome is unknown; the claim completes from the chain.",
          ...json(x402PendingResponse),
        },
        "400": problem("Invalid body, before any payment is asked for (`invalid_request`)."),
        "409": problem(
          "The payment already paid a claim for another payout_address (`payment_already_used`: the signature does not cover the body), or its payment-identifier id was first used with another request (`payment_identifier_conflict`); both carry the first `claim_id`. Nothing more was charged.",
        ),
        "402": {
          description:
            "Payment required (`payment_required`) or refused (`payment_refused`, with `reason`).",
          headers: z.object({
            "PAYMENT-REQUIRED": z.string().meta({ description: "The x402 v2 terms, base64 JSON." }),
          }),
          content: { "application/problem+json": { schema: x402PaymentRequiredResponse } },
        },
        ...jsonBodyErrors,
        ...common,
        "503": alsoUnavailable(
          "The facilitator is unreachable (`facilitator_unavailable`) or x402 is off (`x402_disabled`).",
        ),
      },
    },
  },
  "/api/health": {
    get: {
      operationId: "getHealth",
      summary: "Database, RPC, indexer, payout wallet and backlogs",
      responses: {
        "200": { description: "ok, or degraded with reasons.", ...json(healthResponse) },
        ...common,
        "503": { description: "down: a dependency is unreachable.", ...json(healthResponse) },
      },
    },
  },
  "/metrics": {
    get: {
      operationId: "getMetrics",
      summary: "Prometheus metrics",
      responses: {
        "200": {
          description: "Prometheus text exposition.",
          content: { "text/plain": { schema: z.string() } },
        },
        "401": problem(
          "METRICS_TOKEN is set and the bearer token is missing or wrong (`unauthorized`).",
        ),
        ...common,
      },
    },
  },
  "/ledger": {
    get: {
      operationId: "getLedgerPage",
      summary: "The ledger as an HTML page",
      requestParams: { query: ledgerQuery },
      responses: {
        "200": { description: "The page.", content: { "text/html": { schema: z.string() } } },
        "400": {
          description: "Invalid filters.",
          content: { "text/html": { schema: z.string() } },
        },
        ...common,
      },
    },
  },
  "/": {
    get: {
      operationId: "getHomePage",
      summary: "The home page for people; the offer document for a client that asks for JSON",
      responses: {
        "200": {
          description: "The page, or with `Accept: application/json` the offer (as GET /api/info).",
          content: { ...htmlPage, "application/json": { schema: offerResponse } },
        },
        ...common,
      },
    },
  },
  "/claims": {
    get: {
      operationId: "startClaimPage",
      summary: "303 to the start-a-claim form on the home page",
      responses: {
        "303": { description: "See /#start.", headers: z.object({ Location: z.string() }) },
        ...common,
      },
    },
    post: {
      operationId: "startClaimFromForm",
      summary: "The home page's start-a-claim form (application/x-www-form-urlencoded)",
      description:
        "The fields of POST /api/claims (payout_address; optional agent_name and email, left " +
        "empty when not given) and its checks. 303 to the claim's page, or the form again with " +
        "the errors beside their fields. Only from this site's pages (Sec-Fetch-Site / Origin).",
      requestBody: {
        content: {
          "application/x-www-form-urlencoded": {
            schema: z.object({
              payout_address: z.string(),
              agent_name: z.string().optional(),
              email: z.string().optional(),
            }),
          },
        },
      },
      responses: {
        ...common,
        "303": {
          description: "Created: see the claim's page.",
          headers: z.object({ Location: z.string() }),
        },
        "400": pageProblem("The form again, with the errors beside their fields."),
        "403": pageProblem("Sent from another site's page (`cross_site_form`)."),
        "409": { description: "The form again (`tx_already_used`).", content: htmlPage },
        "413": pageProblem("The form is larger than 16 kB (`body_too_large`)."),
        "415": pageProblem("Not a form body (`unsupported_form_type`)."),
        "422": { description: "The form again (`tx_not_qualifying`).", content: htmlPage },
        "429": pageProblem(
          "The form again (`too_many_open_claims`), or too many requests (`rate_limited`).",
        ),
        "503": pageProblem("A dependency is slow (`temporarily_unavailable`)."),
      },
    },
  },
  "/claims/{claim_id}": {
    get: {
      operationId: "getClaimPage",
      summary: "A claim for people: its steps, what to pay (with a QR code), payout, receipt",
      requestParams: claimIdParam,
      responses: {
        "200": {
          description: "The page, or with `Accept: application/json` the claim (as the API).",
          content: { ...htmlPage, "application/json": { schema: claimResponse } },
        },
        "404": pageProblem("No such claim, or not a claim id (`claim_not_found`)."),
        ...common,
      },
    },
  },
  "/verify": {
    get: {
      operationId: "getReceiptChecker",
      summary: "The receipt checker; with `claim_id`, the verdict on that claim's receipt",
      requestParams: {
        query: z.object({ claim_id: z.string().optional() }),
      },
      responses: {
        "200": { description: "The checker (and the verdict).", content: htmlPage },
        "404": { description: "No such claim (`claim_not_found`).", content: htmlPage },
        "409": { description: "No receipt yet (`receipt_not_ready`).", content: htmlPage },
        ...common,
      },
    },
    post: {
      operationId: "checkPastedReceipt",
      summary: "The verdict on a pasted receipt (form field `receipt`: its JSON)",
      requestBody: {
        content: {
          "application/x-www-form-urlencoded": { schema: z.object({ receipt: z.string() }) },
        },
      },
      responses: {
        "200": { description: "The verdict, genuine or not.", content: htmlPage },
        "400": pageProblem("The checker again: not JSON, or not a receipt's fields."),
        "403": pageProblem("Sent from another site's page (`cross_site_form`)."),
        "413": pageProblem("The form is larger than 16 kB (`body_too_large`)."),
        "415": pageProblem("Not a form body (`unsupported_form_type`)."),
        ...common,
      },
    },
  },
  "/payments": {
    get: {
      operationId: "findPaymentPage",
      summary: "Search a payment by transaction hash: 303 to its page",
      requestParams: { query: z.object({ tx_hash: z.string().optional() }) },
      responses: {
        "200": { description: "The search.", content: htmlPage },
        "303": {
          description: "See the payment's page.",
          headers: z.object({ Location: z.string() }),
        },
        "400": { description: "Not a transaction hash.", content: htmlPage },
        ...common,
      },
    },
  },
  "/payments/{tx_hash}": {
    get: {
      operationId: "getPaymentPage",
      summary: "What happened to my payment, for people",
      requestParams: { path: z.object({ tx_hash: z.string() }) },
      responses: {
        "200": {
          description: "The page, or with `Accept: application/json` the explanation (as the API).",
          content: { ...htmlPage, "application/json": { schema: paymentExplanationResponse } },
        },
        "404": pageProblem(
          "The chain does not know it (`tx_not_found`), or not a hash (`not_found`).",
        ),
        ...common,
      },
    },
  },
  "/graphql": {
    post: {
      operationId: "graphql",
      summary: "GraphQL: offer, claim(id), ledger (connection), stats",
      requestBody: json(
        z.object({
          query: z.string(),
          variables: z.record(z.string(), z.unknown()).optional(),
          operationName: z.string().optional(),
        }),
      ),
      responses: {
        "200": { description: "A GraphQL result (errors inside).", ...graphqlResult },
        "400": {
          description:
            "Not a GraphQL request (the body is not an object, `variables` is not an object), " +
            "or, to a client that accepts application/graphql-response+json, a query that does " +
            "not parse or validate: `errors` says why.",
          ...graphqlResult,
        },
        "406": { description: "The Accept header names nothing GraphQL answers with." },
        ...jsonBodyErrors,
        ...common,
      },
    },
    get: {
      operationId: "graphiql",
      summary: "GraphiQL in a browser (local assets), or a query in the URL",
      responses: {
        "200": {
          description: "GraphiQL (to a browser: Accept text/html), or the result of `?query=`.",
          content: { "text/html": { schema: z.string() }, ...graphqlResult.content },
        },
        "400": {
          description:
            "To a client that accepts application/graphql-response+json, a query that does not " +
            "parse or validate.",
          ...graphqlResult,
        },
        "405": { description: "A mutation by GET (send it by POST).", ...graphqlResult },
        "406": { description: "The Accept header names nothing GraphQL answers with." },
        ...common,
      },
    },
  },
  "/openapi.json": {
    get: {
      operationId: "getOpenApi",
      summary: "This document",
      responses: {
        "200": { description: "OpenAPI 3.1.0.", ...json(z.looseObject({})) },
        ...common,
      },
    },
  },
  "/docs": {
    get: {
      operationId: "getDocs",
      summary: "This document as a readable page",
      responses: {
        "200": { description: "HTML.", content: { "text/html": { schema: z.string() } } },
        ...common,
      },
    },
  },
  "/mcp": {
    post: {
      operationId: "mcp",
      summary: "MCP over streamable HTTP (stateless): the tools, x402 inside earn_with_x402",
      description:
        "JSON-RPC 2.0 as MCP defines it: `initialize` (2025-11-25) or `server/discover` " +
        "(2026-07-28), `tools/list`, `tools/call`. Tools: get_offer, create_claim, get_claim, " +
        "attach_payment_tx, get_receipt, get_ledger, earn_with_x402 (x402: the payment in " +
        '`params._meta["x402/payment"]`, the settlement in `result._meta["x402/payment-response"]`). ' +
        "Tool errors are `isError` results carrying this API's reason codes. Host and Origin " +
        "must be this service's (403 otherwise). Errors outside a tool are JSON-RPC errors.",
      requestBody: { content: { "application/json": { schema: jsonRpcMessage } } },
      responses: {
        "200": {
          description: "The JSON-RPC answer (JSON, or one SSE event for 2025 clients).",
          content: {
            "application/json": { schema: jsonRpcMessage },
            "text/event-stream": { schema: z.string() },
          },
        },
        "202": { description: "A notification, accepted." },
        "400": jsonRpcError("Not JSON (-32700) or not a valid JSON-RPC request."),
        "403": jsonRpcError("A foreign Host or Origin (DNS-rebinding protection)."),
        "406": jsonRpcError("The Accept header allows neither JSON nor SSE."),
        "413": jsonRpcError("The body is larger than 16 kB."),
        "415": problem("The body is not application/json (`unsupported_media_type`)."),
        ...common,
      },
    },
  },
  "/.well-known/agent-card.json": {
    get: {
      operationId: "getAgentCard",
      summary: "The A2A agent card: skills, the JSON-RPC endpoint (/a2a), the x402 extension",
      responses: {
        "200": {
          description: "The A2A 1.0 agent card.",
          content: { "application/json": { schema: z.looseObject({ name: z.string() }) } },
        },
        ...common,
      },
    },
  },
  "/a2a": {
    post: {
      operationId: "a2a",
      summary: "A2A JSON-RPC: SendMessage, GetTask, ListTasks, CancelTask (and 0.3 names)",
      description:
        "A2A 1.0 JSON-RPC (`A2A-Version: 1.0`, the default without the header for 1.0 method " +
        "names); 0.3 methods (`message/send`, `tasks/get`) are served too. A claim is a task " +
        "that follows the claim's state; the x402 extension (a2a-x402 v0.2) carries the payment " +
        "in message metadata.",
      requestBody: { content: { "application/json": { schema: jsonRpcMessage } } },
      responses: {
        "200": {
          description: "The JSON-RPC answer (a result or an A2A error).",
          content: { "application/json": { schema: jsonRpcMessage } },
        },
        "400": jsonRpcError("Not JSON (-32700)."),
        "403": jsonRpcError("A foreign Host or Origin."),
        "413": jsonRpcError("The body is larger than 16 kB."),
        "415": problem("The body is not application/json (`unsupported_media_type`)."),
        ...common,
      },
    },
  },
  "/llms.txt": {
    get: {
      operationId: "getLlmsTxt",
      summary: "A plain-text guide for language models (llmstxt.org)",
      responses: {
        "200": { description: "Markdown text.", content: { "text/plain": { schema: z.string() } } },
        ...common,
      },
    },
  },
};

export function buildOpenApiDocument(config: ServiceConfig) {
  return createDocument({
    openapi: "3.1.0",
    info: {
      title: "pay-and-earn",
      version: "1.0.0",
      description:
        "Pay 10 USDC on Base and receive 1 USDC back plus an EIP-191 signed receipt that proves " +
        "you earned it. Three ways to pay: a claim, x402 v2, or mail. Errors are RFC 9457 " +
        "problem details whose stable `type` is /problems/<code>." +
        (config.mail.intake !== "off" && config.mail.intakeAddress
          ? ` To earn by mail, write to ${config.mail.intakeAddress} with your payout address: ` +
            "the reply gives the exact amount to pay and where, and the receipt comes by reply " +
            "(GET /api/info, `email`)."
          : " The mail flow is not enabled on this deployment (GET /api/info, `email`)."),
    },
    servers: [{ url: config.http.publicUrl }],
    paths: operations,
    webhooks: eventWebhooks(),
  });
}

/**
 * What the service posts to webhook endpoints (operators' and claims' `webhook_url`), one entry
 * per event type: the envelope, signed per Standard Webhooks (docs/events.md).
 */
function eventWebhooks(): Record<string, Record<string, ZodOpenApiOperationObject>> {
  const signed = z.object({
    "webhook-id": z.string().meta({ description: "The event's id: deduplicate by it." }),
    "webhook-timestamp": z.string().meta({ description: "Unix seconds when signed." }),
    "webhook-signature": z
      .string()
      .meta({ description: "v1,<base64 HMAC-SHA256 of id.timestamp.body> (Standard Webhooks)." }),
    "pay-and-earn-delivery-attempt": z.string().meta({ description: "1 for the first attempt." }),
    "pay-and-earn-redelivery": z
      .string()
      .optional()
      .meta({ description: "true when this event may have reached you before." }),
  });
  const answer = {
    "2XX": { description: "Received. Anything else, a timeout or a redirect is retried." },
  };
  const entries = EVENT_TYPE_NAMES.map((type) => [
    type,
    {
      post: {
        operationId: `webhook_${type.replace(".", "_")}`,
        summary:
          type === "payment.unmatched"
            ? "A confirmed transfer to pay_to paid no claim"
            : `A claim became ${type === "claim.created" ? "awaiting_payment" : type.slice(6)}`,
        requestParams: { header: signed },
        requestBody: json(type === "payment.unmatched" ? paymentEventEnvelope : claimEventEnvelope),
        responses: answer,
      },
    },
  ]);
  return Object.fromEntries(entries);
}

export type OpenApiDocument = ReturnType<typeof buildOpenApiDocument>;
