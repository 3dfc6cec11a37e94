import { checkAgainstOpenApi } from "./openApiCheck.ts";

export interface JsonResponse<Body = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: Body;
}

/** A JSON request as a client would make it; the body comes back parsed, whatever the status. */
export async function requestJson<Body = Record<string, unknown>>(
  url: string,
  init: {
    method?: string;
    body?: unknown;
    rawBody?: string;
    headers?: Record<string, string>;
    /** For the few tests that send what no documented route answers (e.g. unknown paths). */
    skipOpenApiCheck?: boolean;
  } = {},
): Promise<JsonResponse<Body>> {
  const hasBody = init.body !== undefined || init.rawBody !== undefined;
  const response = await fetch(url, {
    method: init.method ?? (hasBody ? "POST" : "GET"),
    headers: { ...(hasBody ? { "content-type": "application/json" } : {}), ...init.headers },
    body: init.rawBody ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
  });
  const text = await response.text();
  const contentType = response.headers.get("content-type");
  const body = (
    contentType?.includes("json") && text ? JSON.parse(text) : text ? { text } : {}
  ) as Body;
  if (!init.skipOpenApiCheck) {
    await checkAgainstOpenApi(
      url,
      init.method ?? (hasBody ? "POST" : "GET"),
      response.status,
      contentType,
      body,
    );
  }
  return { status: response.status, headers: response.headers, body };
}
