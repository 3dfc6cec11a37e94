import { html, type SafeHtml } from "../html/safeHtml.ts";
import {
  type ProblemCode,
  RECEIPT_VERDICT_REASONS,
  TRANSACTION_STATE_WORDS,
} from "../reasons/reasonCatalog.ts";
import type { FieldError } from "../reasons/refusal.ts";
import type { receiptVerdictView } from "../receipts/receiptView.ts";
import { renderPage } from "./layout.ts";

/**
 * GET /verify (and POST /verify with a pasted receipt): the receipt checker for people. The
 * verdict is POST /api/receipts/verify's, in words: is the signature this service's, is it
 * the receipt on record for its claim, and what does the chain hold now of the payment and
 * the payout it names.
 */

export type ReceiptVerdictView = ReturnType<typeof receiptVerdictView>;

export interface VerifyPageView {
  serviceName: string;
  receiptSigner: string;
  /** What is in the text box: the pasted text, or the receipt of `?claim_id=`. */
  pasted: string;
  verdict: ReceiptVerdictView | null;
  /** Why the text could not be checked, or the claim has no receipt (catalog words). */
  problem: {
    code: ProblemCode;
    title: string;
    detail: string | undefined;
    errors: FieldError[];
  } | null;
}

function headline(verdict: ReceiptVerdictView): { tone: string; text: string } {
  if (verdict.current) {
    return { tone: "ok", text: "Genuine: signed by this service, and the receipt on record." };
  }
  if (verdict.genuine) {
    return { tone: "warn", text: "Signed by this service, but not a receipt on record." };
  }
  return { tone: "bad", text: "Not genuine: this service did not sign this receipt." };
}

function transaction(label: string, state: NonNullable<ReceiptVerdictView["chain"]>["payment"]) {
  const depth =
    state.block_number === null
      ? ""
      : ` Block ${state.block_number}, ${state.confirmations ?? 0} blocks on top.`;
  return html`<dt>${label}</dt><dd data-state="${state.state}">${TRANSACTION_STATE_WORDS[state.state]}${depth}</dd>`;
}

function verdictSection(verdict: ReceiptVerdictView): SafeHtml {
  const { tone, text } = headline(verdict);
  return html`<section class="notice ${tone}" id="verdict" aria-labelledby="verdict-text"
 data-genuine="${String(verdict.genuine)}" data-current="${String(verdict.current)}" data-reason="${verdict.reason}">
<p class="verdict" id="verdict-text">${text}</p>
<p>${RECEIPT_VERDICT_REASONS[verdict.reason]}</p>
<dl class="facts">
<dt>Signed by</dt><dd class="mono">${verdict.signer ?? "nobody (the signature cannot be read)"}</dd>
<dt>This service's key</dt><dd class="mono">${verdict.expected_signer}</dd>
${
  verdict.claim_id
    ? html`<dt>Claim</dt><dd>${
        verdict.genuine
          ? html`<a class="mono" href="/claims/${encodeURIComponent(verdict.claim_id)}">${verdict.claim_id}</a>`
          : html`<span class="mono">${verdict.claim_id}</span>`
      }</dd>`
    : ""
}
${verdict.chain ? [transaction("Payment", verdict.chain.payment), transaction("Payout", verdict.chain.payout)] : ""}
</dl>
</section>`;
}

/** `signature: must be …`; the pasted text as a whole is the field itself, so it goes unnamed. */
function errorText(error: FieldError): string {
  return error.field && error.field !== "receipt"
    ? `${error.field}: ${error.message}`
    : error.message;
}

function problemSection(problem: NonNullable<VerifyPageView["problem"]>): SafeHtml {
  return html`<div class="notice bad" role="alert" id="verify-problem" data-reason="${problem.code}">
<p><strong>${problem.title}</strong></p>
${
  problem.errors.length > 0
    ? html`<ul>${problem.errors.map((error) => html`<li>${errorText(error)}</li>`)}</ul>`
    : problem.detail
      ? html`<p>${problem.detail}</p>`
      : ""
}
</div>`;
}

export function renderVerifyPage(view: VerifyPageView): string {
  const invalid = view.problem !== null && view.problem.errors.length > 0;
  const body = html`<h1>Check a receipt</h1>
<p class="lead">Paste a receipt of this service (the <code>receipt.json</code> a claim page
offers, or any JSON with its <code>message</code> and <code>signature</code>): this page says whether
this service's key <span class="mono">${view.receiptSigner}</span> signed it, whether it is the
receipt on record for its claim, and what the chain holds now of its payment and payout.</p>
${view.verdict ? verdictSection(view.verdict) : ""}
${view.problem ? problemSection(view.problem) : ""}
<form class="stack" method="post" action="/verify">
<div>
<label for="receipt">Receipt<span class="hint" id="receipt-hint">JSON with <code>message</code> and <code>signature</code>.</span></label>
${invalid ? html`<span class="field-error" id="receipt-error">${view.problem?.errors.map(errorText).join("; ")}</span>` : ""}
<textarea id="receipt" name="receipt" spellcheck="false" aria-describedby="${invalid ? "receipt-error receipt-hint" : "receipt-hint"}"${invalid ? html` aria-invalid="true"` : ""}>${view.pasted}</textarea>
</div>
<button type="submit">Check</button>
</form>
<p class="muted">The same check as <code>POST /api/receipts/verify</code>. It can also be done
without this service: viem's <code>verifyMessage({ address, message, signature })</code> with the
key above.</p>`;
  return renderPage({
    title: `Check a receipt · ${view.serviceName}`,
    serviceName: view.serviceName,
    body,
  });
}
