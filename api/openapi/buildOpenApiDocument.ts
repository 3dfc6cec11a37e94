import { z } from "zod";
import {
  createDocument,
  type ZodOpenApiOperationObject,
  type ZodOpenApiResponseObject,
} from "zod-openapi";
import type { ServiceConfig } from "../config.ts";
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

/** Statuses every route can answer. */
const common = {
  "429": rateLimited,
  "500": problem("Unexpected failure (`internal_error`); the body carries a request_id."),
};
/** Statuses every route with a JSON body can answer, before its own validation. */
const jsonBodyErrors = {
  "413": problem("The body is larger than 16 kB (`body_too_large`)."),
  "415": problem("The body is not application/json (`unsupported_media_type`)."),
};

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
        "201": {
          description: "Created, awaiting payment.",
          headers: z.object({ Location: z.string() }),
          ...json(createdClaimResponse),
        },
        "400": problem("Malformed JSON or invalid fields (`invalid_request`, `malformed_json`)."),
        "409": problem("The tx_hash given is already used by another claim (`tx_already_used`)."),
        "422": problem("The tx_hash given does not qualify (`tx_not_qualifying`, with `reason`)."),
        "503": problem("No unique amount is free right now (`amount_space_exhausted`)."),
        ...jsonBodyErrors,
        ...common,
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
        "404": problem("No such claim (`claim_not_found`)."),
        ...common,
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
        "400": problem("Malformed JSON or an invalid hash (`invalid_request`)."),
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
        "400": problem("Not a transaction hash (`invalid_request`)."),
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
        "402": {
          description:
            "Payment required (`payment_required`) or refused (`payment_refused`, with `reason`).",
          headers: z.object({
            "PAYMENT-REQUIRED": z.string().meta({ description: "The x402 v2 terms, base64 JSON." }),
          }),
          content: { "application/problem+json": { schema: x402PaymentRequiredResponse } },
        },
        "503": problem(
          "The facilitator is unreachable (`facilitator_unavailable`) or x402 is off (`x402_disabled`).",
        ),
        ...jsonBodyErrors,
        ...common,
      },
    },
  },
  "/api/health": {
    get: {
      operationId: "getHealth",
      summary: "Database, RPC, indexer, payout wallet and backlogs",
      responses: {
        "200": { description: "ok, or degraded with reasons.", ...json(healthResponse) },
        "503": { description: "down: a dependency is unreachable.", ...json(healthResponse) },
        ...common,
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
        "200": { description: "A GraphQL result (errors inside).", ...json(z.looseObject({})) },
        ...jsonBodyErrors,
        ...common,
      },
    },
    get: {
      operationId: "graphiql",
      summary: "GraphiQL in a browser (local assets), or a query in the URL",
      responses: {
        "200": {
          description: "GraphiQL or a result.",
          content: { "text/html": { schema: z.string() } },
        },
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
        "problem details whose stable `type` is /problems/<code>.",
    },
    servers: [{ url: config.http.publicUrl }],
    paths: operations,
  });
}

export type OpenApiDocument = ReturnType<typeof buildOpenApiDocument>;
