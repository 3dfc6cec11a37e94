import { html, htmlText, type SafeHtml, trustedHtml } from "../html/safeHtml.ts";
import type { OpenApiDocument } from "./buildOpenApiDocument.ts";

/**
 * GET /docs: the OpenAPI document as a page a person can read, rendered here on the server
 * (no CDN, no script): every operation with its parameters, body and answers, schemas folded.
 */

export const DOCS_PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const STYLE = trustedHtml(`<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem; color: #1b1f24; }
  h1 { margin-bottom: 0.2rem; } header p { color: #555; }
  nav ul { columns: 2; padding-left: 1.2rem; } @media (max-width: 40rem) { nav ul { columns: 1; } }
  section.operation { border-top: 1px solid #ddd; padding: 0.8rem 0; }
  .method { display: inline-block; min-width: 3.5rem; font: 600 0.8rem monospace; padding: 0.1rem 0.4rem;
    border-radius: 4px; color: #fff; background: #555; text-align: center; }
  .get { background: #2f6f9f; } .post { background: #2e7d32; }
  code, pre { font-family: ui-monospace, monospace; font-size: 0.85rem; }
  pre { background: #f5f6f8; padding: 0.6rem; overflow-x: auto; border-radius: 4px; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: 0.2rem 0.5rem; vertical-align: top; border-bottom: 1px solid #eee; }
  details summary { cursor: pointer; color: #2f6f9f; }
</style>`);

type Json = Record<string, unknown>;

function schemaBlock(label: string, schema: unknown): SafeHtml {
  if (!schema) return html``;
  return html`<details><summary>${label}</summary><pre>${JSON.stringify(schema, null, 2)}</pre></details>`;
}

function contentSchemas(content: unknown): SafeHtml[] {
  if (!content || typeof content !== "object") return [];
  return Object.entries(content as Record<string, { schema?: unknown }>).map(([type, media]) =>
    schemaBlock(`${type} schema`, media.schema),
  );
}

function operationSection(path: string, method: string, operation: Json): SafeHtml {
  const parameters = (operation.parameters ?? []) as Json[];
  const requestBody = operation.requestBody as { content?: unknown } | undefined;
  const responses = (operation.responses ?? {}) as Record<string, Json>;
  const anchor = String(operation.operationId ?? `${method}-${path}`);
  return html`<section class="operation" id="${anchor}">
    <h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${path}</code></h3>
    <p><strong>${String(operation.summary ?? "")}</strong></p>
    ${operation.description ? html`<p>${String(operation.description)}</p>` : ""}
    ${
      parameters.length > 0
        ? html`<table><tr><th>Parameter</th><th>In</th><th>Description</th></tr>${parameters.map(
            (parameter) =>
              html`<tr><td><code>${String(parameter.name)}</code></td><td>${String(parameter.in)}</td><td>${String(
                parameter.description ?? (parameter.schema as Json | undefined)?.description ?? "",
              )}</td></tr>`,
          )}</table>`
        : ""
    }
    ${requestBody ? html`<p>Request body:</p>${contentSchemas(requestBody.content)}` : ""}
    <table><tr><th>Status</th><th>Answer</th></tr>${Object.entries(responses).map(
      ([status, response]) =>
        html`<tr><td><code>${status}</code></td><td>${String(response.description ?? "")}${contentSchemas(
          response.content,
        )}</td></tr>`,
    )}</table>
  </section>`;
}

export function renderDocsPage(document: OpenApiDocument): string {
  const operations = Object.entries(document.paths ?? {}).flatMap(([path, item]) =>
    Object.entries(item as Record<string, Json>)
      .filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method))
      .map(([method, operation]) => ({ path, method, operation })),
  );
  const page = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${document.info.title} API reference</title>${STYLE}</head>
<body>
<header><h1>${document.info.title} API</h1>
<p>Version ${document.info.version} · OpenAPI ${document.openapi} · <a href="/openapi.json">openapi.json</a> · <a href="/llms.txt">llms.txt</a> · <a href="/ledger">ledger</a></p>
<p>${document.info.description ?? ""}</p></header>
<nav><h2>Operations</h2><ul>${operations.map(
    ({ path, method, operation }) =>
      html`<li><a href="#${String(operation.operationId ?? "")}">${method.toUpperCase()} ${path}</a></li>`,
  )}</ul></nav>
<main>${operations.map(({ path, method, operation }) => operationSection(path, method, operation))}</main>
</body></html>`;
  return htmlText(page);
}
