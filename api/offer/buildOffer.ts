import { privateKeyToAccount } from "viem/accounts";
import { networkId, networkName } from "../chain/networkId.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { formatUsdc, PAYOUT_ATOMIC, PRICE_ATOMIC } from "../money.ts";

/**
 * The offer document (SPEC.md "Offer document"): what the service sells, where to pay and how,
 * for people and agents alike. Served at GET /api/info, in GraphQL as `offer`, and its `x402`
 * part at GET /api/x402/earn.
 */

const DAY_SECONDS = 86_400;

function lifetimeInWords(seconds: number): string {
  if (seconds % DAY_SECONDS === 0) {
    const days = seconds / DAY_SECONDS;
    return `${days} day${days === 1 ? "" : "s"}`;
  }
  return `${seconds} seconds`;
}

function facilitatorDescription(config: ServiceConfig): string {
  const { x402 } = config;
  if (x402.facilitator === "local") {
    const address = x402.facilitatorPrivateKey
      ? privateKeyToAccount(x402.facilitatorPrivateKey).address
      : "unknown";
    return `self-hosted: this service verifies and settles in-process, paying gas from ${address}`;
  }
  if (x402.facilitator === "remote") {
    return x402.cdp && !x402.facilitatorUrl
      ? "remote: the Coinbase CDP x402 facilitator"
      : `remote: the x402 facilitator at ${x402.facilitatorUrl}`;
  }
  return "none: x402 is switched off on this deployment";
}

/** A client that pays with the official x402 client; tested by running it (test/integration). */
export function x402ClientExample(config: ServiceConfig): string {
  return [
    "// npm install @x402/fetch @x402/evm viem   (Node 20+, an account holding 10 USDC on Base)",
    'import { wrapFetchWithPayment, x402Client } from "@x402/fetch";',
    'import { ExactEvmScheme } from "@x402/evm";',
    'import { privateKeyToAccount } from "viem/accounts";',
    "",
    "const account = privateKeyToAccount(process.env.PRIVATE_KEY);",
    "const client = x402Client.fromConfig({",
    `  schemes: [{ network: "${networkId(config)}", client: new ExactEvmScheme(account) }],`,
    "  // x402 clients refuse any payment above $1 by default; this offer costs $10.",
    '  spendControls: { maxAmountPerPayment: "$10" },',
    "});",
    "const payingFetch = wrapFetchWithPayment(fetch, client);",
    `const response = await payingFetch("${config.http.publicUrl}/api/x402/earn", {`,
    '  method: "POST",',
    '  headers: { "content-type": "application/json" },',
    '  body: JSON.stringify({ payout_address: account.address, agent_name: "my-agent" }),',
    "});",
    "console.log(response.status, JSON.stringify(await response.json()));",
    "",
  ].join("\n");
}

export function x402Details(config: ServiceConfig) {
  const price = formatUsdc(PRICE_ATOMIC);
  return {
    endpoint: `POST ${config.http.publicUrl}/api/x402/earn`,
    protocol: "x402 v2",
    scheme: "exact",
    network: networkId(config),
    asset: config.chain.usdcAddress,
    amount_atomic: String(PRICE_ATOMIC),
    amount_usdc: price,
    pay_to: config.chain.payTo,
    max_timeout_seconds: config.x402.maxTimeoutSeconds,
    body: {
      payout_address: "string, required: the 0x address that receives the 1 USDC payout",
      agent_name: "string, optional: shown on the public ledger (at most 64 characters)",
      email: "string, optional: the receipt is mailed there too",
    },
    how:
      "POST the JSON body. The answer is 402 with a PAYMENT-REQUIRED header (x402 v2, scheme " +
      `exact, ${price} USDC on ${networkId(config)} to pay_to). Sign the EIP-3009 authorization it ` +
      "asks for and repeat the same request with the PAYMENT-SIGNATURE header. The service settles " +
      "the payment first, then pays out 1 USDC; the 200 answer carries claim_id, payout_tx, the " +
      "signed receipt and a PAYMENT-RESPONSE header. If the payout is not mined within a bounded " +
      "wait, the 200 still carries payout_tx and status_url, and the receipt appears at the " +
      "receipt route once completed. A replay of the same payment returns the same claim and never " +
      "pays twice. The payer's signature covers the payment, not this body: whoever sends a " +
      "PAYMENT-SIGNATURE first chooses the payout_address, so send it only here, over HTTPS; the " +
      "same payment naming another payout_address is refused (409 payment_already_used). For safe " +
      "retries, add the payment-identifier extension's id (16-128 characters): the same id with the " +
      "same request gets the first answer, even with a newly signed payment, and is never charged " +
      "twice; the same id with another request is 409 payment_identifier_conflict.",
    spend_cap:
      `Common x402 clients refuse to pay more than $1 per payment by default. This costs ${price} ` +
      'USDC: raise the cap to at least $10 (with @x402/fetch: spendControls: { maxAmountPerPayment: "$10" }).',
    client_example_js: x402ClientExample(config),
    facilitator: facilitatorDescription(config),
    discoverable_via:
      "the x402 Bazaar discovery extension: the 402 answer declares it with the body's input and " +
      "output schemas, so facilitators that catalogue resources (the x402 Bazaar) can list it",
  };
}

/**
 * How to earn by mail (SPEC.md "What the service does" 3), for the offer's `email`, or why
 * there is no mail flow here.
 */
export function mailFlowText(config: ServiceConfig): string {
  const { mail } = config;
  if (mail.intake === "off" || !mail.intakeAddress) {
    return "The mail flow is not enabled on this deployment: pay with a claim (how_it_works) or with x402.";
  }
  const price = formatUsdc(PRICE_ATOMIC);
  const payout = formatUsdc(PAYOUT_ATOMIC);
  const amount =
    config.claims.variant === "A"
      ? `the exact amount to send (${price} USDC plus a unique fraction, from any wallet, exchanges included)`
      : `what to send (${price} USDC from the payout address, or from any wallet with the transaction hash)`;
  return (
    `Write to ${mail.intakeAddress} with the address that should receive the ${payout} USDC ` +
    "payout (0x and 40 hexadecimal digits) in the subject or the body; optional: a line " +
    '"agent: <name>" for the public ledger, and the hash of a transaction that paid already. ' +
    `One address per message: it makes one claim. The reply, in the same thread, gives ${amount}, ` +
    "pay_to, the network, the USDC contract, the deadline and the claim's status link. Pay as it " +
    "says; if the payment is not picked up, reply in the thread with its transaction hash. Once " +
    "paid out, the receipt (message, signature, signer, payout transaction) comes by reply, also " +
    "attached as receipt.json, with how to verify it. Automatic mail (auto-replies, bounces, " +
    "mailing lists) is never answered" +
    (mail.requireAuth
      ? "; only senders whose domain passes DMARC (or aligned SPF or DKIM) are answered."
      : ".")
  );
}

export function buildOffer(config: ServiceConfig) {
  const price = formatUsdc(PRICE_ATOMIC);
  const payout = formatUsdc(PAYOUT_ATOMIC);
  const lifetime = lifetimeInWords(config.claims.lifetimeSeconds);
  const payStep =
    config.claims.variant === "A"
      ? `2. Send exactly the claim's amount_due_usdc (${price} USDC plus a unique fraction) in USDC ` +
        `on Base to pay_to ${config.chain.payTo}, from any wallet, exchanges included; or send at ` +
        `least ${price} USDC from the claim's payout_address.`
      : `2. Send ${price} USDC on Base to pay_to ${config.chain.payTo} from the claim's ` +
        "payout_address. Paying from another wallet, give the transaction hash as tx_hash with " +
        "POST /api/claims/{claim_id}/tx, with the paying wallet's EIP-191 signature of the claim " +
        "id as signature, so that nobody else can name it first.";
  return {
    service: config.serviceName,
    site: config.http.publicUrl,
    offer: `Pay ${price} USDC on Base and receive ${payout} USDC back plus a signed receipt proving you earned it.`,
    network: networkName(config),
    chain_id: config.chain.chainId,
    testnet: false,
    token: "USDC",
    usdc_contract: config.chain.usdcAddress,
    pay_to: config.chain.payTo,
    price_usdc: price,
    payout_usdc: payout,
    explorer: config.chain.explorerUrl,
    matching_variant: config.claims.variant,
    confirmations: config.chain.confirmations,
    receipt_signer: config.receipts.signer,
    payout_wallet: config.payout.address,
    how_it_works: [
      "1. Create a claim: POST /api/claims with your payout_address (optional: agent_name, email, tx_hash).",
      payStep,
      `3. Poll GET /api/claims/{claim_id}: about a minute at most after your transfer has ${config.chain.confirmations} confirmations it is completed and payout_tx holds the ${payout} USDC payout.`,
      `4. Fetch the receipt: GET /api/claims/{claim_id}/receipt. It is an EIP-191 signature by ${config.receipts.signer}; check it with viem's verifyMessage or POST /api/receipts/verify.`,
      ...(config.mail.intake !== "off" && config.mail.intakeAddress
        ? [
            `By mail instead: write to ${config.mail.intakeAddress} with your payout_address; the reply says exactly what to pay, and the receipt comes by reply (see email).`,
          ]
        : []),
    ],
    x402: x402Details(config),
    email: mailFlowText(config),
    endpoints: {
      info: "GET /api/info",
      create_claim: "POST /api/claims",
      x402_pay_and_earn: "POST /api/x402/earn",
      x402_details: "GET /api/x402/earn",
      claim_status: "GET /api/claims/{claim_id}",
      attach_tx: "POST /api/claims/{claim_id}/tx",
      receipt: "GET /api/claims/{claim_id}/receipt",
      verify_receipt: "POST /api/receipts/verify",
      payment_status: "GET /api/payments/{tx_hash}",
      ledger: "GET /api/ledger",
      ledger_html: "GET /ledger",
      home_page: "GET /",
      claim_page: "GET /claims/{claim_id}",
      receipt_checker: "GET /verify",
      payment_page: "GET /payments/{tx_hash}",
      graphql: "POST /graphql",
      health: "GET /api/health",
      metrics: "GET /metrics",
      openapi: "GET /openapi.json",
      docs: "GET /docs",
      llms: "GET /llms.txt",
      mcp: "POST /mcp",
      a2a_agent_card: "GET /.well-known/agent-card.json",
      a2a_jsonrpc: "POST /a2a",
    },
    terms: [
      `The trade is deliberately unprofitable for the payer: pay ${price} USDC, receive ${payout} USDC.`,
      `No refunds. Transfers below the price earn no payout and are not refunded. Overpayments are not refunded.`,
      `One payment of at least the price earns exactly one payout.`,
      `Unpaid claims expire after ${lifetime}.`,
      ...(config.claims.variant === "B"
        ? [
            "A transaction hash attached without the sender's signature can be named by anyone who sees it first: a payment from the claim's own payout address, or attached with the paying wallet's signature of the claim id, cannot be taken.",
          ]
        : []),
    ],
  };
}

export type Offer = ReturnType<typeof buildOffer>;
