import type { AgentCard, AgentSkill } from "@a2a-js/sdk";
import type { Core } from "../core/createCore.ts";

/** The a2a-x402 extension (v0.2): pay inside a task, with metadata keys `x402.payment.*`. */
export const X402_EXTENSION_URI =
  "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2";

const JSON_AND_TEXT = ["application/json", "text/plain"];

function skill(id: string, name: string, description: string, examples: string[]): AgentSkill {
  return {
    id,
    name,
    description,
    tags: ["payments", "usdc", "base"],
    examples,
    inputModes: JSON_AND_TEXT,
    outputModes: JSON_AND_TEXT,
    securityRequirements: [],
  };
}

/**
 * The agent card (GET /.well-known/agent-card.json): JSON-RPC at /a2a for A2A 1.0 and 0.3
 * clients, one skill per MCP tool, the x402 extension, and the key that signs receipts.
 */
export function buildAgentCard(core: Core): AgentCard {
  const { config, offer } = core;
  const url = `${config.http.publicUrl}/a2a`;
  return {
    name: "pay-and-earn",
    description:
      `${offer.offer} Receipts are EIP-191 signed by ${config.receipts.signer}. Send a data part ` +
      `{"skill":"create_claim","payout_address":"0x…"} or a sentence ("earn 1 USDC to 0x…"): ` +
      "the task asks for the payment (input-required), then follows the claim to completed " +
      "with the receipt as an artifact. With the x402 extension the payment travels inside the " +
      "task and is settled before the payout. Push notifications (CreateTaskPushNotificationConfig) " +
      `follow the task's claim, each signed (pay-and-earn-signature, EIP-191) by ${config.receipts.signer} over webhook-id.webhook-timestamp.body.`,
    supportedInterfaces: [
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" },
    ],
    provider: { url: config.http.publicUrl, organization: config.serviceName },
    version: "1.0.0",
    documentationUrl: `${config.http.publicUrl}/llms.txt`,
    capabilities: {
      streaming: false,
      pushNotifications: true,
      extendedAgentCard: false,
      extensions: [
        {
          uri: X402_EXTENSION_URI,
          description:
            "Pay 10 USDC with x402 v2 (scheme exact, Base) inside the task: the skill " +
            "earn_with_x402 answers input-required with x402.payment.required; send " +
            "x402.payment.payload in the next message's metadata. Settled first, then paid out.",
          required: false,
          params: { receipt_signer: config.receipts.signer, network: offer.x402.network },
        },
      ],
    },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: JSON_AND_TEXT,
    defaultOutputModes: JSON_AND_TEXT,
    skills: [
      skill(
        "create_claim",
        "Earn 1 USDC (claim flow)",
        "Create a claim for a payout_address; the task asks for the payment (input-required " +
          "with the exact amount to pay to pay_to) and completes with the signed receipt.",
        ['{"skill":"create_claim","payout_address":"0x…"}', "earn 1 USDC to 0x…"],
      ),
      skill(
        "earn_with_x402",
        "Pay and earn with x402",
        "Pay 10 USDC with x402 inside the task (extension x402 v0.2) and get 1 USDC back.",
        ['{"skill":"earn_with_x402","payout_address":"0x…"}', "earn with x402 to 0x…"],
      ),
      skill(
        "attach_payment_tx",
        "Name the payment transaction",
        "Name the tx_hash that paid a claim (data part with claim_id and tx_hash).",
        ['{"skill":"attach_payment_tx","claim_id":"clm_…","tx_hash":"0x…"}'],
      ),
      skill("get_offer", "The offer", "Price, payout, network, pay_to, x402 details.", [
        '{"skill":"get_offer"}',
      ]),
      skill("get_claim", "Read a claim", "A claim's status and payment.", [
        '{"skill":"get_claim","claim_id":"clm_…"}',
      ]),
      skill("get_receipt", "The signed receipt", "The EIP-191 receipt of a completed claim.", [
        '{"skill":"get_receipt","claim_id":"clm_…"}',
      ]),
      skill("get_ledger", "The public ledger", "Completed payouts, newest first.", [
        '{"skill":"get_ledger","limit":10}',
      ]),
    ],
    signatures: [],
  };
}
