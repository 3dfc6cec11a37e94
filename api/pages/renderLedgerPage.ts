import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { LedgerTotals } from "../ledger/readLedgerStats.ts";
import { formatUsdc, PAYOUT_ATOMIC, PRICE_ATOMIC } from "../money.ts";
import type { ProblemCode } from "../reasons/reasonCatalog.ts";
import type { LedgerEntryJson } from "../schemas/ledger.ts";
import { explorerLink, plainUsdc, renderPage, shortHex, utcTime } from "./layout.ts";

/**
 * GET /ledger: the ledger for people, in the pages' layout (no script, no external asset),
 * readable on a phone (the table turns into cards on narrow screens).
 */

export interface LedgerPageView {
  serviceName: string;
  entries: LedgerEntryJson[];
  totals: LedgerTotals;
  /** The agent name the page is filtered by, if any. */
  agentName: string | undefined;
  /** Relative links; null where there is no such page. */
  links: { newest: string | null; older: string | null };
}

function row(entry: LedgerEntryJson): SafeHtml {
  return html`<tr>
  <td data-label="Completed"><time datetime="${entry.completed_at}">${utcTime(entry.completed_at)}</time></td>
  <td data-label="Agent" class="agent">${entry.agent_name ?? html`<span class="muted">—</span>`}</td>
  <td data-label="Payout address">${explorerLink(entry.payout_address_explorer_url, shortHex(entry.payout_address), entry.payout_address)}</td>
  <td data-label="Amount">${plainUsdc(entry.amount_usdc)} USDC</td>
  <td data-label="Payment">${entry.payment_tx ? explorerLink(entry.payment_explorer_url, shortHex(entry.payment_tx), entry.payment_tx) : "—"}</td>
  <td data-label="Payout">${explorerLink(entry.payout_explorer_url, shortHex(entry.payout_tx), entry.payout_tx)}</td>
  <td data-label="Flow">${entry.flow}</td>
</tr>`;
}

function figures(totals: LedgerTotals): SafeHtml {
  const latest = totals.lastCompletedAt
    ? utcTime(totals.lastCompletedAt.toISOString())
    : "none yet";
  return html`<ul class="figures">
  <li><strong>${totals.completedPayouts.toLocaleString("en-US")}</strong><span>completed payouts</span></li>
  <li><strong>${formatUsdc(totals.paidOut)} USDC</strong><span>paid out</span></li>
  <li><strong>${formatUsdc(totals.received)} USDC</strong><span>received for them</span></li>
  <li><strong>${totals.uniquePayoutAddresses.toLocaleString("en-US")}</strong><span>unique payout addresses</span></li>
  <li><strong class="time">${latest}</strong><span>latest payout</span></li>
</ul>`;
}

export function renderLedgerPage(view: LedgerPageView): string {
  const filtered = view.agentName !== undefined;
  const body = html`<h1>${view.serviceName}: ledger</h1>
<p class="lead">Recent completed payouts, newest first: each client paid ${formatUsdc(PRICE_ATOMIC)} USDC
on Base and received ${formatUsdc(PAYOUT_ATOMIC)} USDC back with a signed receipt. Also as JSON:
<a href="/api/ledger">/api/ledger</a>.</p>
${figures(view.totals)}
<form class="inline" method="get" action="/ledger">
  <label for="agent_name">Agent name</label>
  <input id="agent_name" name="agent_name" maxlength="64" value="${view.agentName ?? ""}">
  <button type="submit">Filter</button>
  ${filtered ? html`<a href="/ledger">Show all</a>` : ""}
</form>
${
  view.entries.length === 0
    ? html`<p class="empty">${filtered ? "No payouts for this agent name." : "No payouts yet."}</p>`
    : html`<table>
<thead><tr><th>Completed</th><th>Agent</th><th>Payout address</th><th>Amount</th><th>Payment</th><th>Payout</th><th>Flow</th></tr></thead>
<tbody>${view.entries.map(row)}</tbody>
</table>`
}
<nav class="pages" aria-label="Ledger pages">
  <span>${view.links.newest ? html`<a href="${view.links.newest}" rel="first">← Newest</a>` : ""}</span>
  <span>${view.links.older ? html`<a href="${view.links.older}" rel="next">Older →</a>` : ""}</span>
</nav>
<p class="muted">Links open the block explorer. Times are UTC.</p>`;
  return renderPage({ title: `Ledger · ${view.serviceName}`, serviceName: view.serviceName, body });
}

export function renderLedgerErrorPage(
  serviceName: string,
  code: ProblemCode,
  message: string,
  details: string[],
): string {
  return renderPage({
    title: `Ledger: bad request · ${serviceName}`,
    serviceName,
    body: html`<h1 data-reason="${code}">That page of the ledger does not exist</h1>
<p class="lead">${message}</p>
<ul>${details.map((detail) => html`<li>${detail}</li>`)}</ul>
<p><a href="/ledger">Back to the newest payouts</a></p>`,
  });
}
