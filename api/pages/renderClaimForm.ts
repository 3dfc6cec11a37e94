import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { ProblemCode } from "../reasons/reasonCatalog.ts";
import type { FieldError } from "../reasons/refusal.ts";
import { renderPage } from "./layout.ts";

/**
 * The start-a-claim form (on the home page, and alone when it comes back with errors). A plain
 * POST to /claims, so it works without JavaScript; the fields and their checks are those of
 * POST /api/claims, and so are the words of every error, shown next to its field.
 */

export const CLAIM_FORM_FIELDS = ["payout_address", "agent_name", "email"] as const;
export type ClaimFormField = (typeof CLAIM_FORM_FIELDS)[number];
export type ClaimFormValues = Partial<Record<ClaimFormField, string>>;

export interface ClaimFormView {
  values: ClaimFormValues;
  /** The refusal's code, title and detail, when the form came back refused. */
  problem?: { code: ProblemCode; title: string; detail: string | undefined };
  errors: FieldError[];
  /** The receipt is mailed to the email address given (the deployment sends mail). */
  mailEnabled: boolean;
}

const LABELS: Record<ClaimFormField, string> = {
  payout_address: "Payout address",
  agent_name: "Name on the ledger (optional)",
  email: "Email (optional)",
};

function hints(mailEnabled: boolean): Record<ClaimFormField, string> {
  return {
    payout_address:
      "The 0x address on Base that receives the 1 USDC payout: a wallet of yours, or an exchange deposit address for USDC on Base.",
    agent_name: "Shown publicly on the ledger beside your payout; at most 64 characters.",
    email: mailEnabled
      ? "The receipt is mailed there once the claim is completed. Never shown publicly."
      : "Kept with the claim and never shown publicly; this deployment sends no mail yet, so keep the claim page.",
  };
}

function field(
  name: ClaimFormField,
  view: ClaimFormView,
  attributes: { type: string; autocomplete: string; required: boolean; maxlength: number },
): SafeHtml {
  const messages = view.errors.filter((error) => error.field === name);
  const invalid = messages.length > 0;
  const hintId = `${name}-hint`;
  const errorId = `${name}-error`;
  return html`<div>
<label for="${name}">${LABELS[name]}<span class="hint" id="${hintId}">${hints(view.mailEnabled)[name]}</span></label>
${invalid ? html`<span class="field-error" id="${errorId}">${messages.map((error) => error.message).join("; ")}</span>` : ""}
<input id="${name}" name="${name}" type="${attributes.type}" autocomplete="${attributes.autocomplete}"
 maxlength="${attributes.maxlength}" spellcheck="false" value="${view.values[name] ?? ""}"
 aria-describedby="${invalid ? `${errorId} ${hintId}` : hintId}"${invalid ? html` aria-invalid="true"` : ""}${attributes.required ? html` required` : ""}>
</div>`;
}

/** The form itself, for any page. */
export function claimForm(view: ClaimFormView): SafeHtml {
  // Every error is listed above the form (errors on no field, an empty body say, only there),
  // and each field's own beside it.
  return html`${
    view.problem
      ? html`<div class="notice bad" role="alert" data-reason="${view.problem.code}">
<p><strong>${view.problem.title}</strong></p>
<ul>${
          view.errors.length > 0
            ? view.errors.map((error) =>
                (CLAIM_FORM_FIELDS as readonly string[]).includes(error.field)
                  ? html`<li><a href="#${error.field}">${LABELS[error.field as ClaimFormField]}</a>: ${error.message}</li>`
                  : html`<li>${error.message}</li>`,
              )
            : html`<li>${view.problem.detail ?? ""}</li>`
        }</ul>
</div>`
      : ""
  }
<form class="stack" method="post" action="/claims" novalidate>
${field("payout_address", view, { type: "text", autocomplete: "off", required: true, maxlength: 100 })}
${field("agent_name", view, { type: "text", autocomplete: "nickname", required: false, maxlength: 100 })}
${field("email", view, { type: "email", autocomplete: "email", required: false, maxlength: 254 })}
<button type="submit">Start the claim</button>
</form>`;
}

/** The form alone: what POST /claims answers when it refuses. */
export function renderClaimFormPage(view: ClaimFormView & { serviceName: string }): string {
  return renderPage({
    title: `Start a claim · ${view.serviceName}`,
    serviceName: view.serviceName,
    body: html`<h1>Start a claim</h1>
<p class="lead">Nothing was created: correct what is marked and send the form again.</p>
${claimForm(view)}`,
  });
}
