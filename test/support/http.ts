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
  } = {},
): Promise<JsonResponse<Body>> {
  const hasBody = init.body !== undefined || init.rawBody !== undefined;
  const response = await fetch(url, {
    method: init.method ?? (hasBody ? "POST" : "GET"),
    headers: { ...(hasBody ? { "content-type": "application/json" } : {}), ...init.headers },
    body: init.rawBody ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: (text ? JSON.parse(text) : {}) as Body,
  };
}
