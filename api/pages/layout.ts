import { createHash, randomBytes } from "node:crypto";
import { html, htmlText, type SafeHtml, trustedHtml } from "../html/safeHtml.ts";

/**
 * The one layout of every page for people: a header with the service's name and its pages, the
 * page's own content, a footer with the documents for programs. One stylesheet, inline and
 * allowed by its hash; no external asset, no framework, no font to fetch. Readable from a
 * 360-pixel phone up (long hex strings wrap, tables turn into cards).
 */

const STYLE = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #545d69; --bg: #f6f7f9;
  --card: #ffffff; --line: #d5dae0; --accent: #0b5cd5; --ok: #17663a; --ok-bg: #e6f4ea;
  --bad: #a4161a; --bad-bg: #fdecea; --warn-bg: #fff4e0; --warn-line: #c77700; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8eaed; --muted: #a7afba; --bg: #111418;
  --card: #1a1f25; --line: #333b44; --accent: #8ab8ff; --ok: #7ddc9c; --ok-bg: #12291b;
  --bad: #ff9c96; --bad-bg: #331614; --warn-bg: #2e230f; --warn-line: #e0a84a; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
.skip, .sr-only { position: absolute; left: -100rem; }
.skip:focus { left: 1rem; top: .5rem; background: var(--card); padding: .25rem .5rem; }
header.site { border-bottom: 1px solid var(--line); background: var(--card); }
header.site div { max-width: 72rem; margin: 0 auto; padding: .6rem 1rem; display: flex;
  flex-wrap: wrap; gap: .25rem 1.25rem; align-items: baseline; }
header.site .name { font-weight: 700; text-decoration: none; color: var(--fg); }
header.site nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: 0; padding: 0;
  list-style: none; }
main { max-width: 72rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; overflow-wrap: break-word; }
h1 { font-size: 1.6rem; line-height: 1.25; margin: 0 0 .5rem; overflow-wrap: anywhere; }
h2 { font-size: 1.25rem; margin: 2rem 0 .5rem; }
h3 { font-size: 1.05rem; margin: 1.25rem 0 .25rem; }
p.lead { margin: 0 0 1.5rem; color: var(--muted); }
code, .mono, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .9em; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; background: var(--card); border: 1px solid var(--line);
  border-radius: .5rem; padding: .75rem 1rem; margin: .5rem 0; }
.muted { color: var(--muted); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: .5rem;
  padding: 1rem; margin: 0 0 1rem; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr));
  gap: .75rem; margin: 0 0 1.5rem; padding: 0; list-style: none; }
.figures li { background: var(--card); border: 1px solid var(--line); border-radius: .5rem;
  padding: .75rem 1rem; }
.figures strong { display: block; font-size: 1.5rem; }
.figures strong.time { font-size: 1.05rem; padding: .3rem 0 .25rem; }
.figures span { color: var(--muted); font-size: .9rem; }
.ways { display: grid; grid-template-columns: repeat(auto-fit, minmax(17rem, 1fr)); gap: 1rem; }
.ways .card h3 { margin-top: 0; }
form.stack { display: grid; gap: .9rem; max-width: 34rem; }
form.inline { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: 0 0 1rem; }
label { font-weight: 600; }
.hint { display: block; font-weight: 400; color: var(--muted); font-size: .9rem; }
input, textarea { font: inherit; padding: .45rem .6rem; border: 1px solid var(--muted);
  border-radius: .35rem; background: var(--card); color: var(--fg); width: 100%; }
form.inline input { width: auto; min-width: 12rem; flex: 1 1 12rem; }
textarea { min-height: 12rem; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .85rem; }
input[aria-invalid="true"], textarea[aria-invalid="true"] { border: 2px solid var(--bad); }
.field-error { display: block; color: var(--bad); font-weight: 600; margin: .2rem 0 0; }
button { font: inherit; padding: .45rem 1rem; border-radius: .35rem; border: 1px solid var(--accent);
  background: var(--accent); color: #fff; cursor: pointer; justify-self: start; }
@media (prefers-color-scheme: dark) { button { color: #0d1117; } }
button.small { padding: .1rem .6rem; font-size: .85rem; background: transparent;
  color: var(--accent); }
.notice { border-left: 4px solid var(--line); background: var(--card); padding: .75rem 1rem;
  margin: 0 0 1rem; border-radius: 0 .5rem .5rem 0; }
.notice.warn { border-color: var(--warn-line); background: var(--warn-bg); }
.notice.bad { border-color: var(--bad); background: var(--bad-bg); }
.notice.ok { border-color: var(--ok); background: var(--ok-bg); }
.notice > :first-child { margin-top: 0; }
.notice > :last-child { margin-bottom: 0; }
ol.steps { display: flex; flex-wrap: wrap; gap: .5rem; list-style: none; padding: 0;
  margin: 0 0 1.5rem; counter-reset: step; }
ol.steps li { counter-increment: step; padding: .35rem .75rem; border: 1px solid var(--line);
  border-radius: 2rem; background: var(--card); color: var(--muted); }
ol.steps li::before { content: counter(step) ". "; }
ol.steps li.done { color: var(--ok); border-color: var(--ok); }
ol.steps li.done::before { content: "✓ "; }
ol.steps li[aria-current="step"] { color: var(--fg); border: 2px solid var(--accent);
  font-weight: 700; }
dl.facts { display: grid; grid-template-columns: minmax(8rem, max-content) 1fr; gap: .4rem 1rem;
  margin: 0 0 1rem; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.pay { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
.pay dl.facts { flex: 1 1 20rem; }
.amount { font-size: 1.5rem; font-weight: 700; }
figure.qr { margin: 0; flex: 0 0 auto; width: 15rem; max-width: 100%; }
figure.qr svg { display: block; width: 100%; height: auto; border-radius: .35rem; }
figure.qr figcaption { font-size: .85rem; color: var(--muted); margin-top: .35rem; }
.verdict { font-size: 1.3rem; font-weight: 700; margin: 0 0 .5rem; }
table { width: 100%; border-collapse: collapse; background: var(--card);
  border: 1px solid var(--line); border-radius: .5rem; overflow: hidden; }
th, td { text-align: left; padding: .55rem .75rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { font-size: .85rem; color: var(--muted); font-weight: 600; }
td.agent { overflow-wrap: anywhere; }
.empty { padding: 2rem 1rem; text-align: center; color: var(--muted); }
nav.pages { display: flex; justify-content: space-between; gap: 1rem; margin-top: 1rem; }
footer.site { max-width: 72rem; margin: 0 auto; padding: 1rem 1rem 2rem; color: var(--muted);
  font-size: .9rem; border-top: 1px solid var(--line); }
footer.site ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: .25rem 0 0; padding: 0;
  list-style: none; }
@media (max-width: 40rem) {
  h1 { font-size: 1.35rem; }
  dl.facts { grid-template-columns: 1fr; gap: 0 1rem; }
  dl.facts dd { margin-bottom: .5rem; }
  figure.qr { width: 100%; }
  figure.qr svg { max-width: 18rem; }
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

/** The stylesheet is allowed by its hash: no `'unsafe-inline'`, and no nonce that defeats caching. */
const STYLE_HASH = `'sha256-${createHash("sha256").update(STYLE).digest("base64")}'`;

/** A coin, so browsers do not ask for /favicon.ico (and log its 404) on every page. */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><circle cx="16" cy="16" r="15" ' +
  'fill="#0b5cd5"/><text x="16" y="22" font-family="sans-serif" font-size="17" ' +
  'font-weight="700" text-anchor="middle" fill="#fff">$</text></svg>';

/** A fresh script nonce for one response. */
export function newNonce(): string {
  return randomBytes(16).toString("base64");
}

/**
 * The Content-Security-Policy of a page: nothing loads or runs but the stylesheet (by its hash),
 * the favicon, and, on a page that has one, its own script (by this response's nonce), which
 * may call this service and nothing else. No page can be framed, rebase its links, or send a
 * form anywhere but here. Trusted Types with no policy: no script may write HTML as a string.
 */
export function pageCsp(options: { scriptNonce?: string } = {}): string {
  const script = options.scriptNonce
    ? [
        `script-src 'nonce-${options.scriptNonce}'`,
        "connect-src 'self'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
      ]
    : [];
  return [
    "default-src 'none'",
    `style-src ${STYLE_HASH}`,
    "img-src 'self'",
    ...script,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export interface PageOptions {
  title: string;
  serviceName: string;
  body: SafeHtml;
  /** A script of this codebase (never data), run under this response's nonce. */
  script?: { nonce: string; source: string };
}

const NAV: { href: string; text: string }[] = [
  { href: "/#start", text: "Start a claim" },
  { href: "/ledger", text: "Ledger" },
  { href: "/verify", text: "Check a receipt" },
  { href: "/payments", text: "Find a payment" },
  { href: "/docs", text: "API" },
];

export function renderPage(options: PageOptions): string {
  const script = options.script
    ? html`<script nonce="${options.script.nonce}">${trustedHtml(options.script.source)}</script>`
    : "";
  return `<!doctype html>\n${htmlText(html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title}</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>${trustedHtml(STYLE)}</style>
</head>
<body>
<a class="skip" href="#content">Skip to the content</a>
<header class="site"><div>
<a class="name" href="/">${options.serviceName}</a>
<nav aria-label="Pages"><ul>${NAV.map((item) => html`<li><a href="${item.href}">${item.text}</a></li>`)}</ul></nav>
</div></header>
<main id="content">${options.body}</main>
<footer class="site">For programs:
<ul>
<li><a href="/api/info">Offer (JSON)</a></li>
<li><a href="/openapi.json">OpenAPI</a></li>
<li><a href="/docs">API docs</a></li>
<li><a href="/llms.txt">llms.txt</a></li>
<li><a href="/graphql">GraphQL</a></li>
</ul>
</footer>
${script}
</body>
</html>`)}\n`;
}

/** `0x1234…abcd`: a hash or address shortened for a table cell (the whole one in `title`). */
export function shortHex(hex: string): string {
  return `${hex.slice(0, 6)}…${hex.slice(-4)}`;
}

/** `2025-01-31 12:00:00 UTC` from an ISO time. */
export function utcTime(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

/** A link to the block explorer (outside this site: no referrer, no opener). */
export function explorerLink(href: string | null, text: string, title?: string): SafeHtml {
  if (!href) return html`<span class="mono" title="${title ?? text}">${text}</span>`;
  return html`<a class="mono" href="${href}" title="${title ?? text}" rel="noopener noreferrer">${text}</a>`;
}

/** `10.000000` → `10`, for amounts in running text. */
export function plainUsdc(decimal: string): string {
  return decimal.includes(".") ? decimal.replace(/\.?0+$/, "") : decimal;
}
