import type { FacilitatorClient } from "@x402/core/server";
import { x402ResourceServer } from "@x402/core/server";
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { bazaarResourceServerExtension, declareDiscoveryExtension } from "@x402/extensions/bazaar";
import type { ServiceConfig } from "../config.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { networkId } from "../offer/buildOffer.ts";

/** What an x402 payment for this service must be, and the 402 answer that says so. */
export interface X402Terms {
  requirements: PaymentRequirements;
  paymentRequired(error: string): Promise<PaymentRequired>;
  /** Our requirements if the payload's `accepted` names exactly them, else undefined. */
  matching(payload: PaymentPayload): PaymentRequirements | undefined;
}

const EARN_PATH = "/api/x402/earn";
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

  const declared = declareDiscoveryExtension({
    bodyType: "json",
    input: inputExample,
    inputSchema,
    output: {
      example: { claim_id: "clm_…", status: "completed", payout_tx: "0x…", receipt: null },
      schema: outputSchema,
    },
  });
  // The Bazaar extension takes the HTTP method from a request context it only duck-types
  // (`method` and `adapter` keys); without it the declaration fails validation.
  const extensions = server.enrichExtensions(declared, {
    method: "POST",
    path: EARN_PATH,
    adapter: undefined,
  });
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
  return {
    requirements,
    paymentRequired: async (error) =>
      error === PAYMENT_REQUIRED
        ? unpaid
        : server.createPaymentRequiredResponse([requirements], resource, error, extensions),
    matching: (payload) => server.findMatchingRequirements([requirements], payload),
  };
}
