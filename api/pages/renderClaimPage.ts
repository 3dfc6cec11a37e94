import type { z } from "zod";
import type { ClaimView } from "../claims/claimView.ts";
import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { receiptResponse } from "../schemas/responses.ts";
import { explorerLink, plainUsdc, renderPage, utcTime } from "./layout.ts";

/**
 * GET /claims/{claim_id}: one claim for people. Where it stands as a step list; while it
 * awaits payment, exactly what to send (amount, pay_to, network, token contract, a QR code of
 * the EIP-681 request) and a plain warning for exchange users; once completed, the payout and
 * the receipt with what it proves. A small script (under the page's nonce) follows the claim
 * and reloads the page when it moves; without JavaScript, a refresh link does.
 */

export interface ClaimPageView {
  serviceName: string;
  claim: ClaimView;
  /** Matching variant A: the exact amount identifies the claim, from any wallet. */
  usdcContractUrl: string;
  /** While awaiting payment: the EIP-681 URI and its QR code. */
  payment: { uri: string; qr: SafeHtml } | null;
  /** Once completed. */
  receipt: z.infer<typeof receiptResponse> | null;
  /** Words for a claim that will not complete (expired, failed), from the reason catalog. */
  stopped: { title: string; detail: string | undefined } | null;
  script: { nonce: string; source: string } | null;
}

const STEPS: { status: ClaimView["status"]; label: string }[] = [
  { status: "awaiting_payment", label: "Awaiting payment" },
  { status: "paid", label: "Paid" },
  { status: "paying", label: "Paying out" },
  { status: "completed", label: "Completed" },
];

/** How many steps are behind the claim, and which one it is on (-1: none, it stopped). */
function progress(claim: ClaimView): { done: number; current: number } {
  switch (claim.status) {
    case "expired":
      return { done: 0, current: -1 };
    case "failed":
      return { done: claim.payment ? 2 : 0, current: -1 };
    case "completed":
      return { done: 4, current: 3 };
    default: {
      const index = STEPS.findIndex((step) => step.status === claim.status);
      return { done: index, current: index };
    }
  }
}

function steps(claim: ClaimView): SafeHtml {
  const { done, current } = progress(claim);
  return html`<ol class="steps" aria-label="Progress">${STEPS.map((step, index) => {
    const isDone = index < done;
    const state = isDone ? " (done)" : index === current ? " (now)" : "";
    return html`<li class="${isDone ? "done" : ""}"${index === current ? html` aria-current="step"` : ""}>${step.label}<span class="sr-only">${state}</span></li>`;
  })}</ol>`;
}

function copyButton(target: string, what: string): SafeHtml {
  return html`<button class="small" type="button" data-copy="${target}" hidden><span>Copy</span><span class="sr-only"> the ${what}</span></button>`;
}

function payNow(view: ClaimPageView): SafeHtml {
  const instructions = view.claim.payment_instructions;
  if (!instructions) return html``;
  const amount = instructions.amount_usdc;
  return html`<h2>Pay</h2>
${
  instructions.unique_amount
    ? html`<div class="notice warn" id="exchange-warning">
<p><strong>Paying from an exchange?</strong> Send <strong>exactly ${amount} USDC</strong>, on
<strong>${instructions.network}</strong> (not Ethereum or another network), of the USDC whose
contract is <span class="mono">${instructions.usdc_contract}</span>. If the exchange takes its fee
out of the amount, raise the withdrawal so that exactly ${amount} USDC arrives: any other amount
does not pay this claim, and nothing is refunded.</p>
</div>`
    : html`<div class="notice warn" id="exchange-warning">
<p><strong>Paying from an exchange?</strong> For this claim a payment counts when it comes
from your payout address, or when you name its transaction (see below). Send USDC on
<strong>${instructions.network}</strong>, of the contract
<span class="mono">${instructions.usdc_contract}</span>; nothing is refunded.</p>
</div>`
}
<div class="pay">
<dl class="facts">
<dt>Amount</dt><dd><span class="amount mono" id="amount">${amount}</span> USDC ${copyButton("amount", "amount")}</dd>
<dt>To</dt><dd><span class="mono" id="pay-to">${instructions.pay_to}</span> ${copyButton("pay-to", "address to pay")}</dd>
<dt>Network</dt><dd id="network">${instructions.network} (chain id ${instructions.chain_id})</dd>
<dt>Token</dt><dd>USDC, contract ${explorerLink(view.usdcContractUrl, instructions.usdc_contract)}</dd>
<dt>Pay before</dt><dd><time datetime="${instructions.pay_before}">${utcTime(instructions.pay_before)}</time></dd>
</dl>
${
  view.payment
    ? html`<figure class="qr">${view.payment.qr}
<figcaption>Scan with a wallet app: a request for exactly ${amount} USDC on ${instructions.network} to
the address above. <a href="${view.payment.uri}">Open in a wallet</a></figcaption>
</figure>`
    : ""
}
</div>
<h3>Ways to pay</h3>
<ul>${instructions.ways.map((way) => html`<li>${way}</li>`)}</ul>
<p>${instructions.warning}</p>`;
}

function paymentFacts(claim: ClaimView): SafeHtml {
  const { payment } = claim;
  if (!payment) return html``;
  return html`<h2>Payment</h2>
<dl class="facts">
<dt>Transaction</dt><dd>${explorerLink(payment.explorer_url, payment.tx_hash)}</dd>
<dt>Amount</dt><dd>${payment.amount_usdc} USDC</dd>
<dt>From</dt><dd class="mono">${payment.from}</dd>
<dt>Block</dt><dd>${payment.block_number}</dd>
</dl>`;
}

function payoutFacts(claim: ClaimView): SafeHtml {
  if (!claim.payout_tx) return html``;
  return html`<h2>Payout</h2>
<dl class="facts">
<dt>Transaction</dt><dd id="payout-tx">${explorerLink(claim.payout_explorer_url, claim.payout_tx)}</dd>
<dt>Amount</dt><dd>${claim.payout_usdc} USDC to <span class="mono">${claim.payout_address}</span></dd>
<dt>State</dt><dd>${claim.status === "completed" ? "Mined" : claim.status === "failed" ? "Reverted" : "Sent, waiting to be mined"}</dd>
</dl>`;
}

function receiptSection(view: ClaimPageView): SafeHtml {
  const { receipt, claim } = view;
  if (!receipt) return html``;
  return html`<h2>Your receipt</h2>
<p>What it proves: this service's receipt key <span class="mono">${receipt.signer}</span> signed,
with an EIP-191 signature, that the holder <span class="mono">${claim.payout_address}</span> earned
${plainUsdc(claim.payout_usdc)} USDC, naming the claim, the payment and the payout transactions.
Anyone can check it without trusting this site: viem's <code>verifyMessage</code> with the signer,
the message and the signature, or the <a href="/verify?claim_id=${claim.claim_id}">receipt checker</a>.</p>
<pre id="receipt-message">${receipt.message}</pre>
<dl class="facts">
<dt>Signature</dt><dd class="mono" id="receipt-signature">${receipt.signature}</dd>
<dt>Signer</dt><dd class="mono">${receipt.signer}</dd>
<dt>Issued</dt><dd><time datetime="${receipt.issued_at}">${utcTime(receipt.issued_at)}</time></dd>
</dl>
<p><a id="receipt-download" href="/api/claims/${claim.claim_id}/receipt" download="receipt.json">Download receipt.json</a>
· <a href="/verify?claim_id=${claim.claim_id}">Check this receipt</a></p>`;
}

export function renderClaimPage(view: ClaimPageView): string {
  const { claim } = view;
  const live = view.script
    ? html`<p class="muted" id="live"><span id="live-status">This page does not update itself
without JavaScript:</span> <a href="/claims/${claim.claim_id}">Refresh</a> to see where the claim stands.</p>`
    : "";
  const body = html`<div id="claim" data-claim-id="${claim.claim_id}" data-status="${claim.status}">
<h1>Claim <span class="mono">${claim.claim_id}</span></h1>
${steps(claim)}
${
  view.stopped
    ? html`<div class="notice bad" role="status"><p><strong>${view.stopped.title}</strong></p>
${view.stopped.detail ? html`<p>${view.stopped.detail}</p>` : ""}
<p><a href="/#start">Start a new claim</a></p></div>`
    : claim.status === "completed"
      ? html`<div class="notice ok" role="status"><p><strong>Completed:</strong> ${plainUsdc(claim.payout_usdc)} USDC
was paid out to your address, and your receipt is below.</p></div>`
      : ""
}
${live}
<dl class="facts">
<dt>Payout address</dt><dd class="mono" id="payout-address">${claim.payout_address}</dd>
<dt>Name on the ledger</dt><dd id="agent-name">${claim.agent_name ?? html`<span class="muted">none</span>`}</dd>
<dt>Receipt by email</dt><dd>${claim.email_receipt ? "yes" : "no"}</dd>
<dt>Created</dt><dd><time datetime="${claim.created_at}">${utcTime(claim.created_at)}</time></dd>
</dl>
${payNow(view)}
${paymentFacts(claim)}
${payoutFacts(claim)}
${receiptSection(view)}
</div>`;
  return renderPage({
    title: `Claim ${claim.claim_id} · ${view.serviceName}`,
    serviceName: view.serviceName,
    body,
    ...(view.script ? { script: view.script } : {}),
  });
}
