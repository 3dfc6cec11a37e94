import type { z } from "zod";
import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { paymentExplanationResponse } from "../schemas/responses.ts";
import { explorerLink, plainUsdc, renderPage } from "./layout.ts";

/**
 * GET /payments/{tx_hash}: "what happened to my payment?" for people. The same explanation as
 * GET /api/payments/{tx_hash} (its view, its words), laid out to read: per USDC transfer to
 * pay_to in the transaction, the claim it paid, or why it paid none.
 */

export type PaymentExplanationView = z.infer<typeof paymentExplanationResponse>;

const STATE_LABELS: Record<PaymentExplanationView["transfers"][number]["state"], string> = {
  paid_claim: "Paid a claim",
  unmatched: "Paid no claim",
  awaiting_confirmations: "Waiting for confirmations",
  not_indexed_yet: "Just mined",
};

/** The tx-hash search (home page, GET /payments): a GET, so its answer is a link to share. */
export function paymentSearchForm(value: string, error?: string): SafeHtml {
  return html`<form class="inline" method="get" action="/payments" role="search" aria-label="Find a payment">
<label for="tx_hash">Transaction hash</label>
<input id="tx_hash" name="tx_hash" type="text" autocomplete="off" spellcheck="false" maxlength="100"
 placeholder="0x…" value="${value}"${error ? html` aria-invalid="true" aria-describedby="tx_hash-error"` : ""}>
<button type="submit">Look it up</button>
${error ? html`<span class="field-error" id="tx_hash-error">${error}</span>` : ""}
</form>`;
}

/** GET /payments: the search alone, with the error of a hash that is not one. */
export function renderPaymentSearchPage(view: {
  serviceName: string;
  value: string;
  error?: string;
}): string {
  return renderPage({
    title: `Find a payment · ${view.serviceName}`,
    serviceName: view.serviceName,
    body: html`<h1>What happened to my payment?</h1>
<p class="lead">The hash of the transaction that sent USDC to this service (your wallet or
exchange shows it, sometimes as "TxID").</p>
${paymentSearchForm(view.value, view.error)}`,
  });
}

function transfer(entry: PaymentExplanationView["transfers"][number]): SafeHtml {
  const tone = entry.state === "paid_claim" ? "ok" : entry.state === "unmatched" ? "bad" : "";
  return html`<section class="notice ${tone}" aria-label="Transfer ${entry.log_index}">
<p><strong>${STATE_LABELS[entry.state]}:</strong> ${entry.explanation}</p>
<dl class="facts">
<dt>Amount</dt><dd>${entry.amount_usdc} USDC</dd>
<dt>From</dt><dd class="mono">${entry.from}</dd>
<dt>Block</dt><dd>${entry.block_number}${entry.confirmations === null ? "" : ` (${entry.confirmations} blocks on top)`}</dd>
${
  entry.claim_id
    ? html`<dt>Claim</dt><dd><a class="mono" href="/claims/${entry.claim_id}">${entry.claim_id}</a>${entry.claim_status ? ` (${entry.claim_status.replace(/_/g, " ")})` : ""}</dd>`
    : ""
}
</dl>
</section>`;
}

export function renderPaymentPage(view: {
  serviceName: string;
  payment: PaymentExplanationView;
  priceUsdc: string;
}): string {
  const { payment } = view;
  return renderPage({
    title: `Payment ${payment.tx_hash} · ${view.serviceName}`,
    serviceName: view.serviceName,
    body: html`<h1>What happened to this payment</h1>
<p class="lead">Transaction ${explorerLink(payment.explorer_url, payment.tx_hash)}</p>
<p id="summary"><strong>${payment.summary}</strong></p>
${payment.transfers.map(transfer)}
<p class="muted">Only USDC transfers to <code>${payment.pay_to}</code> count. A transfer pays at most
one claim; below ${plainUsdc(view.priceUsdc)} USDC it earns nothing and nothing is refunded.</p>
<p><a href="/payments/${payment.tx_hash}">Look again</a> · <a href="/payments">Find another payment</a></p>`,
  });
}
