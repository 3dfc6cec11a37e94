import { html, type SafeHtml } from "../html/safeHtml.ts";
import { renderPage } from "./layout.ts";

/**
 * A page that says no (an unknown claim, a hash that is not one, a form from another site…):
 * the reason's title and words from the catalog, and where to go from here.
 */
export function renderProblemPage(view: {
  serviceName: string;
  title: string;
  detail: string | undefined;
  /** What a person can do next (links of this site). */
  next: SafeHtml;
}): string {
  return renderPage({
    title: `${view.title} · ${view.serviceName}`,
    serviceName: view.serviceName,
    body: html`<h1>${view.title}</h1>
${view.detail ? html`<p class="lead" id="problem-detail">${view.detail}</p>` : ""}
${view.next}`,
  });
}

export const START_A_CLAIM = html`<p><a href="/#start">Start a new claim</a> · <a href="/">Home</a></p>`;
