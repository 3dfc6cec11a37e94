import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { ProblemCode } from "../reasons/reasonCatalog.ts";
import { renderPage } from "./layout.ts";

/**
 * A page that says no (an unknown claim, a hash that is not one, a form from another site…):
 * the reason's title and words from the catalog, and where to go from here. The reason's code
 * is on the block that says it (`data-reason`), as every surface names it
 * (docs/surfaces.md#one-refusal-one-code).
 */
export function renderProblemPage(view: {
  serviceName: string;
  code: ProblemCode;
  title: string;
  detail: string | undefined;
  /** What a person can do next (links of this site). */
  next: SafeHtml;
}): string {
  return renderPage({
    title: `${view.title} · ${view.serviceName}`,
    serviceName: view.serviceName,
    body: html`<div data-reason="${view.code}"><h1>${view.title}</h1>
${view.detail ? html`<p class="lead" id="problem-detail">${view.detail}</p>` : ""}</div>
${view.next}`,
  });
}

export const START_A_CLAIM = html`<p><a href="/#start">Start a new claim</a> · <a href="/">Home</a></p>`;
