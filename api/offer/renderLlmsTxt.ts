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

## Optional

- The agent-tool interface (MCP, /mcp) and the agent-to-agent interface (A2A, /.well-known/agent-card.json) are not enabled on this deployment; every step above works over plain HTTP.
`;
}
