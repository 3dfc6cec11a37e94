import type { FacilitatorClient } from "@x402/core/server";
import { x402ResourceServer } from "@x402/core/server";
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { bazaarResourceServerExtension, declareDiscoveryExtension } from "@x402/extensions/bazaar";
import {
  declarePaymentIdentifierExtension,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import { networkId } from "../chain/networkId.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { PRICE_ATOMIC } from "../money.ts";

/** What an x402 payment for this service must be, and the 402 answer that says so. */
export interface X402Terms {
  requirements: PaymentRequirements;
  paymentRequired(error: string): Promise<PaymentRequired>;
  /** Our requirements if the payload's `accepted` names exactly them, else undefined. */
  matching(payload: PaymentPayload): PaymentRequirements | undefined;
  /**
   * The same answer as the MCP tool gives it: the tool as its resource and a Bazaar
   * declaration of the tool (the requirements, and so the payments that fit, are the same).
   */
  forMcpTool(paymentRequired: PaymentRequired): PaymentRequired;
}

const EARN_PATH = "/api/x402/earn";
/** The MCP tool that takes the same payment (api/mcp), and where it is served. */
export const MCP_EARN_TOOL = "earn_with_x402";
const MCP_PATH = "/mcp";
export const PAYMENT_REQUIRED = "Payment required";

// Example and JSON schema of the body, for the Bazaar discovery extension (x402 catalogues).
const inputExample = {
  payout_address: "0x000000000000000000000000000000000000dEaD",
  agent_name: "my-agent",
};
const inputSchema = {
  properties: {
    payout_address: { type: "string", pattern: "^0x[0-9a-fA-F]{40}$" },
    agent_name: { type: "string", minLength: 1, maxLength: 64 },
    email: { type: "string", maxLength: 254 },
  },
  required: ["payout_address"],
  additionalProperties: false,
};
const outputSchema = {
  properties: {
    claim_id: { type: "string" },
    status: { type: "string" },
    payout_tx: { type: ["string", "null"] },
    receipt: {
      type: ["object", "null"],
      properties: {
        message: { type: "string" },
        signature: { type: "string" },
        signer: { type: "string" },
      },
    },
    status_url: { type: "string" },
  },
  required: ["claim_id", "status", "status_url"],
};

/**
 * Builds the terms once per process with the SDK's resource server (it needs the
 * facilitator's supported kinds, so this is async and may fail while the facilitator is down).
 */
export async function prepareX402Terms(
  config: ServiceConfig,
  facilitator: FacilitatorClient,
): Promise<X402Terms> {
  const server = new x402ResourceServer(facilitator)
    .register(networkId(config), new ExactEvmScheme())
    .registerExtension(bazaarResourceServerExtension);
  await server.initialize();
  const [requirements] = await server.buildPaymentRequirements({
    scheme: "exact",
    network: networkId(config),
    payTo: config.chain.payTo,
    price: {
      amount: String(PRICE_ATOMIC),
      asset: config.chain.usdcAddress,
      extra: { name: "USD Coin", version: "2" },
    },
    maxTimeoutSeconds: config.x402.maxTimeoutSeconds,
  });
  if (!requirements) throw new Error("x402: no payment requirements were built");

  // One example answer for both discovery declarations; it validates against outputSchema.
  const outputExample = {
    claim_id: "clm_…",
    status: "completed",
    payout_tx: "0x…",
    receipt: { message: "pay-and-earn receipt …", signature: "0x…", signer: "0x…" },
    status_url: `${config.http.publicUrl}/api/claims/clm_…`,
  };
  const declared = declareDiscoveryExtension({
    bodyType: "json",
    input: inputExample,
    inputSchema,
    output: { example: outputExample, schema: outputSchema },
  });
  // The Bazaar extension takes the HTTP method from a request context it only duck-types
  // (`method` and `adapter` keys); without it the declaration fails validation.
  // Optional idempotency: a client that sends an id gets the first answer back for a retry
  // of the same request, even with a newly signed payment, and is never charged twice.
  const idempotency = { [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false) };
  const extensions = {
    ...server.enrichExtensions(declared, { method: "POST", path: EARN_PATH, adapter: undefined }),
    ...idempotency,
  };
  const resource = {
    url: `${config.http.publicUrl}${EARN_PATH}`,
    description: "Pay 10 USDC on Base, receive 1 USDC back and a signed receipt of earning it",
    mimeType: "application/json",
  };

  // The unpaid answer is the same every time: built once (the 402 path is the hot one).
  const unpaid = await server.createPaymentRequiredResponse(
    [requirements],
    resource,
    PAYMENT_REQUIRED,
    extensions,
  );
  const mcpExtensions = declareDiscoveryExtension({
    toolName: MCP_EARN_TOOL,
    description: resource.description,
    transport: "streamable-http",
    inputSchema: { type: "object", ...inputSchema },
    example: inputExample,
    output: { example: outputExample, schema: outputSchema },
  });
  const mcpResource = {
    url: `${config.http.publicUrl}${MCP_PATH}#${MCP_EARN_TOOL}`,
    description: resource.description,
    mimeType: "application/json",
  };

  return {
    requirements,
    forMcpTool: (paymentRequired) => ({
      ...paymentRequired,
      resource: mcpResource,
      extensions: { ...mcpExtensions, ...idempotency },
    }),
    paymentRequired: async (error) =>
      error === PAYMENT_REQUIRED
        ? unpaid
        : server.createPaymentRequiredResponse([requirements], resource, error, extensions),
    matching: (payload) => server.findMatchingRequirements([requirements], payload),
  };
}
