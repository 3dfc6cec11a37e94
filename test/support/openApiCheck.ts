import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/**
 * Every response an integration test receives through `requestJson` (so `stack.api`) is checked
 * against the service's own /openapi.json: the status must be documented for the route, and
 * a JSON body must match the documented schema. Documentation cannot drift from behaviour.
 */

type Schema = Record<string, unknown>;
interface Operation {
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
}

const documents = new Map<string, Promise<Document>>();
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
const compiled = new WeakMap<Schema, ReturnType<typeof ajv.compile>>();

function documentFor(origin: string): Promise<Document> {
  let document = documents.get(origin);
  if (!document) {
    document = fetch(`${origin}/openapi.json`).then(async (response) => {
      if (response.status !== 200) throw new Error(`GET /openapi.json answered ${response.status}`);
      return (await response.json()) as Document;
    });
    documents.set(origin, document);
  }
  return document;
}

function operationFor(document: Document, method: string, path: string): Operation | undefined {
  for (const [template, item] of Object.entries(document.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^/]+\}/g, "[^/]+")}/?$`);
    if (pattern.test(path)) return item[method.toLowerCase()];
  }
  return undefined;
}

export async function checkAgainstOpenApi(
  url: string,
  method: string,
  status: number,
  contentType: string | null,
  body: unknown,
): Promise<void> {
  const { origin, pathname } = new URL(url);
  const operation = operationFor(await documentFor(origin), method, pathname);
  if (!operation) throw new Error(`OpenAPI: ${method} ${pathname} is not documented`);
  const response = operation.responses?.[String(status)];
  if (!response)
    throw new Error(`OpenAPI: ${method} ${pathname} does not document status ${status}`);
  const mediaType = contentType?.split(";")[0]?.trim() ?? "";
  const documented = response.content ?? {};
  if (Object.keys(documented).length === 0) return;
  const schema = documented[mediaType]?.schema;
  if (!schema) {
    throw new Error(
      `OpenAPI: ${method} ${pathname} ${status} answered ${mediaType}, documented: ${Object.keys(documented).join(", ")}`,
    );
  }
  if (!mediaType.endsWith("json")) return;
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (!validate(body)) {
    throw new Error(
      `OpenAPI: ${method} ${pathname} ${status} body does not match the document: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 800)}`,
    );
  }
}
