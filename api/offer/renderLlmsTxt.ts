import type { Offer } from "./buildOffer.ts";

/**
 * GET /llms.txt (llmstxt.org): an H1, a summary blockquote, how to pay each way, then links.
 * Built from the offer document, so the two never disagree.
 */
export function renderLlmsTxt(offer: Offer): string {
  const site = offer.site;
  return `# ${offer.service}

> ${offer.offer} Network: ${offer.network} (chain id ${offer.chain_id}); token: USDC at ${offer.usdc_contract}; pay_to: ${offer.pay_to}. The trade loses money on purpose: its product is the signed receipt, proof that the holder earned ${offer.payout_usdc} USDC.

Receipts are EIP-191 signatures by ${offer.receipt_signer}; check one with viem's verifyMessage or POST ${site}/api/receipts/verify. Errors are RFC 9457 problem+json with a stable \`type\` (/problems/<code>).

## Pay with a claim

${offer.how_it_works.join("\n")}

If a payment went wrong, GET ${site}/api/payments/{tx_hash} says, for each USDC transfer to pay_to in that transaction, which claim it paid or why it paid none.

## Pay with x402 (one request)

POST ${offer.x402.endpoint.replace(/^POST /, "")} with {"payout_address": "0x…"}. ${offer.x402.how}

${offer.x402.spend_cap}

\`\`\`js
${offer.x402.client_example_js}\`\`\`

## For agents: MCP and A2A

- MCP (streamable HTTP, stateless; protocol 2025-11-25 with \`initialize\`, and 2026-07-28 with \`server/discover\`): ${site}/mcp. Tools: get_offer, create_claim, get_claim, attach_payment_tx, get_receipt, get_ledger, and earn_with_x402, which pays and earns in one call (x402 over MCP: call it, sign the PaymentRequired it returns, call again with the PaymentPayload in \`_meta["x402/payment"]\`; the settlement comes back in \`_meta["x402/payment-response"]\`). Errors are \`isError\` results with the same reason codes as the HTTP API.
- A2A 1.0 (JSON-RPC; 0.3 clients too): agent card at ${site}/.well-known/agent-card.json, endpoint ${site}/a2a. Send {"skill":"create_claim","payout_address":"0x…"} as a data part, or the sentence "earn 1 USDC to 0x…": the task asks for the payment (input-required), then follows the claim to completed with the receipt as an artifact. With the a2a-x402 extension (v0.2) the payment travels in the task's messages (\`x402.payment.payload\`).
- One payment is used once: the same x402 authorization sent over HTTP, MCP or A2A gets the same claim and one payout.

## Pay by mail

${offer.email}

## Terms

${offer.terms.map((term) => `- ${term}`).join("\n")}

## Docs

- [Offer document](${site}/api/info): every payment detail as JSON
- [OpenAPI 3.1](${site}/openapi.json): every route, status and schema ([readable](${site}/docs))
- [GraphQL](${site}/graphql): offer, claim(id), ledger, stats
- [Public ledger](${site}/api/ledger): recent completed payouts ([as a page](${site}/ledger))
- [Health](${site}/api/health)
- [MCP](${site}/mcp): the tools above, over streamable HTTP
- [A2A agent card](${site}/.well-known/agent-card.json): skills, JSON-RPC endpoint, x402 extension

## For people

- [Home page](${site}/): the offer, live figures, and a start-a-claim form that works in any browser, without JavaScript
- Claim page, ${site}/claims/{claim_id}: what to pay (amount, pay_to, a QR code of the EIP-681 request), the status as it moves, then the payout and the receipt
- [Receipt checker](${site}/verify): paste a receipt, or open ${site}/verify?claim_id={claim_id}
- Payment page, ${site}/payments/{tx_hash}: what happened to a payment

`;
}
