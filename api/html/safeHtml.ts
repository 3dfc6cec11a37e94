/**
 * HTML built so that escaping cannot be forgotten: `html` escapes every interpolated value
 * unless it is itself the result of `html`. Agent names and everything else a client sent
 * reach the ledger page only through here.
 */

const SAFE = Symbol("safeHtml");

export interface SafeHtml {
  readonly [SAFE]: string;
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ESCAPES[character] ?? character);
}

function isSafeHtml(value: unknown): value is SafeHtml {
  return typeof value === "object" && value !== null && SAFE in value;
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return "";
  if (Array.isArray(value)) return value.map(render).join("");
  if (isSafeHtml(value)) return value[SAFE];
  return escapeHtml(String(value));
}

/** Template tag: literal parts as written, values escaped (arrays rendered item by item). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let text = strings[0] ?? "";
  values.forEach((value, index) => {
    text += render(value) + (strings[index + 1] ?? "");
  });
  return { [SAFE]: text };
}

/** Markup written in this codebase (a stylesheet constant), never data: inserted as is. */
export function trustedHtml(constant: string): SafeHtml {
  return { [SAFE]: constant };
}

export function htmlText(fragment: SafeHtml): string {
  return fragment[SAFE];
}
