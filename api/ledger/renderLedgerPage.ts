import { html, htmlText, type SafeHtml, trustedHtml } from "../html/safeHtml.ts";
import { formatUsdc, PAYOUT_ATOMIC, PRICE_ATOMIC } from "../money.ts";
import type { LedgerEntryJson } from "../schemas/ledger.ts";
import type { LedgerTotals } from "./readLedgerStats.ts";

/**
 * GET /ledger: the ledger for people. One self-contained page: inline CSS, no scripts, no
 * external assets, readable on a phone (the table turns into cards on narrow screens).
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

/** `default-src 'none'`: nothing but the inline style may load or run. */
export const LEDGER_PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; " +
  "form-action 'self'; frame-ancestors 'none'";

const STYLE = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #5b6470; --bg: #f6f7f9;
  --card: #ffffff; --line: #dde1e6; --accent: #0b5cd5; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8eaed; --muted: #a0a8b3; --bg: #111418;
  --card: #1a1f25; --line: #2d343c; --accent: #7cb0ff; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 72rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
p.lead { margin: 0 0 1.5rem; color: var(--muted); }
a { color: var(--accent); }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .9em; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr));
  gap: .75rem; margin: 0 0 1.5rem; padding: 0; list-style: none; }
.figures li { background: var(--card); border: 1px solid var(--line); border-radius: .5rem;
  padding: .75rem 1rem; }
.figures strong { display: block; font-size: 1.5rem; }
.figures strong.time { font-size: 1.05rem; padding: .3rem 0 .25rem; }
.figures span { color: var(--muted); font-size: .9rem; }
form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: 0 0 1rem; }
input { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: .35rem;
  background: var(--card); color: var(--fg); min-width: 12rem; }
button { font: inherit; padding: .35rem .9rem; border-radius: .35rem; border: 1px solid var(--accent);
  background: var(--accent); color: #fff; }
table { width: 100%; border-collapse: collapse; background: var(--card);
  border: 1px solid var(--line); border-radius: .5rem; overflow: hidden; }
th, td { text-align: left; padding: .55rem .75rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { font-size: .85rem; color: var(--muted); font-weight: 600; }
td.agent { overflow-wrap: anywhere; }
.muted { color: var(--muted); }
.empty { padding: 2rem 1rem; text-align: center; color: var(--muted); }
nav.pages { display: flex; justify-content: space-between; gap: 1rem; margin-top: 1rem; }
footer { margin-top: 2rem; color: var(--muted); font-size: .9rem; }
@media (max-width: 40rem) {
  table, tbody, tr, td { display: block; width: 100%; }
  thead { display: none; }
  table { border: 0; background: none; }
  tr { background: var(--card); border: 1px solid var(--line); border-radius: .5rem;
    margin-bottom: .75rem; padding: .25rem 0; }
  td { border: 0; padding: .3rem .9rem; display: flex; gap: .75rem; justify-content: space-between; }
  td::before { content: attr(data-label); color: var(--muted); font-size: .85rem; flex: none; }
  td.agent { text-align: right; }
}
`;

function short(hex: string): string {
  return `${hex.slice(0, 6)}…${hex.slice(-4)}`;
}

function utcTime(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

function link(href: string | null, text: string, title: string): SafeHtml {
  if (!href) return html`<span class="mono" title="${title}">${text}</span>`;
  return html`<a class="mono" href="${href}" title="${title}" rel="noopener noreferrer">${text}</a>`;
}

function row(entry: LedgerEntryJson): SafeHtml {
  return html`<tr>
  <td data-label="Completed"><time datetime="${entry.completed_at}">${utcTime(entry.completed_at)}</time></td>
  <td data-label="Agent" class="agent">${entry.agent_name ?? html`<span class="muted">—</span>`}</td>
  <td data-label="Payout address">${link(entry.payout_address_explorer_url, short(entry.payout_address), entry.payout_address)}</td>
  <td data-label="Amount">${entry.amount_usdc.replace(/\.?0+$/, "")} USDC</td>
  <td data-label="Payment">${entry.payment_tx ? link(entry.payment_explorer_url, short(entry.payment_tx), entry.payment_tx) : "—"}</td>
  <td data-label="Payout">${link(entry.payout_explorer_url, short(entry.payout_tx), entry.payout_tx)}</td>
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

function page(title: string, body: SafeHtml): string {
  return `<!doctype html>\n${htmlText(html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${trustedHtml(STYLE)}</style>
</head>
<body><main>${body}</main></body>
</html>`)}\n`;
}

export function renderLedgerPage(view: LedgerPageView): string {
  const filtered = view.agentName !== undefined;
  const body = html`<h1>${view.serviceName}: ledger</h1>
<p class="lead">Recent completed payouts, newest first: each client paid ${formatUsdc(PRICE_ATOMIC)} USDC
on Base and received ${formatUsdc(PAYOUT_ATOMIC)} USDC back with a signed receipt. Also as JSON:
<a href="/api/ledger">/api/ledger</a>.</p>
${figures(view.totals)}
<form method="get" action="/ledger">
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
<nav class="pages">
  <span>${view.links.newest ? html`<a href="${view.links.newest}" rel="first">← Newest</a>` : ""}</span>
  <span>${view.links.older ? html`<a href="${view.links.older}" rel="next">Older →</a>` : ""}</span>
</nav>
<footer>Links open the block explorer. Times are UTC.</footer>`;
  return page(`Ledger · ${view.serviceName}`, body);
}

export function renderLedgerErrorPage(message: string, details: string[]): string {
  return page(
    "Ledger: bad request",
    html`<h1>That page of the ledger does not exist</h1>
<p class="lead">${message}</p>
<ul>${details.map((detail) => html`<li>${detail}</li>`)}</ul>
<p><a href="/ledger">Back to the newest payouts</a></p>`,
  );
}
