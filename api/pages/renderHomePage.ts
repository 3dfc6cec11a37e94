import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { LedgerTotals } from "../ledger/readLedgerStats.ts";
import { formatUsdc } from "../money.ts";
import type { Offer } from "../offer/buildOffer.ts";
import type { LedgerEntryJson } from "../schemas/ledger.ts";
import { explorerLink, plainUsdc, renderPage, shortHex, utcTime } from "./layout.ts";
import { type ClaimFormView, claimForm } from "./renderClaimForm.ts";
import { paymentSearchForm } from "./renderPaymentPage.ts";

/**
 * GET /: the offer for people. What is sold, for how much, the ways to earn (a browser, x402,
 * and mail once the deployment has it), live figures from the ledger, the start-a-claim form,
 * a payment search, and every document and interface for programs.
 */

export interface HomePageView {
  offer: Offer;
  totals: LedgerTotals;
  /** The newest completed payouts. */
  latest: LedgerEntryJson[];
  x402Enabled: boolean;
  form: ClaimFormView;
}

/** The mailbox the mail flow reads, when the offer's mail instructions name one. */
export function intakeMailbox(offer: Pick<Offer, "email">): string | null {
  return /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/.exec(offer.email)?.[0] ?? null;
}

/** `GET /path` of the offer's endpoints: a link when a browser can open it, else the route. */
function endpoint(offer: Offer, role: string, text: string): SafeHtml | null {
  const route = (offer.endpoints as Record<string, string | undefined>)[role];
  if (!route) return null;
  const [method, path] = route.split(" ", 2) as [string, string];
  return method === "GET"
    ? html`<li><a href="${path}">${text}</a> <code>${route}</code></li>`
    : html`<li>${text}: <code>${method} ${offer.site}${path}</code></li>`;
}

function figures(view: HomePageView): SafeHtml {
  const { offer, totals } = view;
  const latest = totals.lastCompletedAt
    ? utcTime(totals.lastCompletedAt.toISOString())
    : "none yet";
  return html`<ul class="figures" aria-label="Figures">
<li><strong>${offer.price_usdc} USDC</strong><span>you pay</span></li>
<li><strong>${offer.payout_usdc} USDC</strong><span>you get back, with a signed receipt</span></li>
<li><strong id="completed-payouts">${totals.completedPayouts.toLocaleString("en-US")}</strong><span>completed payouts (${formatUsdc(totals.paidOut)} USDC paid out)</span></li>
<li><strong class="time">${latest}</strong><span>latest payout</span></li>
</ul>`;
}

function latestPayouts(entries: LedgerEntryJson[]): SafeHtml {
  if (entries.length === 0) return html`<p class="muted">No payouts yet: be the first.</p>`;
  return html`<table>
<thead><tr><th>Completed</th><th>Agent</th><th>Payout address</th><th>Amount</th><th>Payout</th></tr></thead>
<tbody>${entries.map(
    (entry) => html`<tr>
<td data-label="Completed"><time datetime="${entry.completed_at}">${utcTime(entry.completed_at)}</time></td>
<td data-label="Agent" class="agent">${entry.agent_name ?? html`<span class="muted">—</span>`}</td>
<td data-label="Payout address">${explorerLink(entry.payout_address_explorer_url, shortHex(entry.payout_address), entry.payout_address)}</td>
<td data-label="Amount">${plainUsdc(entry.amount_usdc)} USDC</td>
<td data-label="Payout">${explorerLink(entry.payout_explorer_url, shortHex(entry.payout_tx), entry.payout_tx)}</td>
</tr>`,
  )}</tbody>
</table>`;
}

function ways(view: HomePageView): SafeHtml {
  const { offer } = view;
  const mailbox = intakeMailbox(offer);
  return html`<div class="ways">
<section class="card" aria-labelledby="way-browser">
<h3 id="way-browser">In a browser</h3>
<p>Give your payout address below, then send the exact amount the claim page shows from any
wallet or exchange app. The page follows your payment and shows the payout and the receipt.</p>
<p><a href="#start">Start a claim</a></p>
</section>
<section class="card" aria-labelledby="way-x402">
<h3 id="way-x402">With x402, in one request</h3>
${
  view.x402Enabled
    ? html`<p>For programs and agents: <code>${offer.x402.endpoint}</code> answers 402 with the
terms; sign the ${offer.x402.amount_usdc} USDC authorization and repeat the request. The answer
carries the payout and the receipt.</p>
<p><a href="/api/x402/earn">The x402 terms</a> · <a href="/llms.txt">a client example</a></p>`
    : html`<p>x402 payments are switched off on this deployment.</p>`
}
</section>
${
  mailbox
    ? html`<section class="card" aria-labelledby="way-mail">
<h3 id="way-mail">By email</h3>
<p>${offer.email}</p>
<p><a href="mailto:${mailbox}">${mailbox}</a></p>
</section>`
    : ""
}
</div>`;
}

function forPrograms(offer: Offer): SafeHtml {
  const agents = [
    endpoint(offer, "mcp", "MCP (agent tools)"),
    endpoint(offer, "a2a_agent_card", "A2A agent card"),
    endpoint(offer, "a2a_jsonrpc", "A2A JSON-RPC"),
  ].filter((item) => item !== null);
  return html`<ul>
<li><a href="/ledger">The public ledger</a> (also <a href="/api/ledger">as JSON</a>)</li>
<li><a href="/docs">API documentation</a> and <a href="/openapi.json">OpenAPI 3.1</a></li>
<li><a href="/llms.txt">llms.txt</a>: the whole offer in plain text, for language models</li>
<li><a href="/graphql">GraphQL</a>: offer, claims, ledger, figures</li>
<li><a href="/api/info">The offer document</a> (JSON; also <code>GET /</code> with <code>Accept: application/json</code>)</li>
${agents}
</ul>`;
}

export function renderHomePage(view: HomePageView): string {
  const { offer } = view;
  const body = html`<h1>${offer.service}</h1>
<p class="lead">${offer.offer}</p>
${figures(view)}
<p>The trade loses money on purpose: what you buy is the receipt, a statement signed by this
service's key <code>${offer.receipt_signer}</code> that your address earned ${offer.payout_usdc} USDC,
which anyone can check. Payments are USDC on ${offer.network} to <code>${offer.pay_to}</code>.</p>

<h2>Ways to earn</h2>
${ways(view)}

<h2 id="start">Start a claim</h2>
${claimForm(view.form)}

<h2>Latest payouts</h2>
${latestPayouts(view.latest)}
<p><a href="/ledger">The whole ledger</a></p>

<h2 id="find-payment">What happened to my payment?</h2>
<p>Paste the transaction hash of a USDC transfer you sent to <code>${offer.pay_to}</code>: the page
says which claim it paid, or why it paid none.</p>
${paymentSearchForm("")}

<h2>Check a receipt</h2>
<p>Anyone's receipt: <a href="/verify">the receipt checker</a> says whether this service signed it,
whether it is the receipt on record, and what the chain holds of its payment and payout.</p>

<h2>Terms</h2>
<ul>${offer.terms.map((term) => html`<li>${term}</li>`)}</ul>

<h2>For programs and agents</h2>
${forPrograms(offer)}`;
  return renderPage({
    title: `${offer.service}: ${offer.offer}`,
    serviceName: offer.service,
    body,
  });
}
