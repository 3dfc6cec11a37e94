export interface StreamedEvent {
  id: string;
  event: string;
  data: { id: string; type: string; time: string; data: Record<string, unknown> };
}

/**
 * Reads a Server-Sent Events stream as a client would (fetch, the text parsed per the SSE
 * format) until `count` events came, then hangs up. `lastEventId` resumes, as EventSource does.
 */
export async function readEventStream(
  url: string,
  options: { count: number; lastEventId?: string; timeoutMs?: number },
): Promise<{ status: number; headers: Headers; events: StreamedEvent[] }> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 30_000);
  try {
    const response = await fetch(url, {
      headers: {
        accept: "text/event-stream",
        ...(options.lastEventId ? { "last-event-id": options.lastEventId } : {}),
      },
      signal: controller.signal,
    });
    const events: StreamedEvent[] = [];
    if (response.status !== 200 || !response.body) {
      await response.body?.cancel();
      return { status: response.status, headers: response.headers, events };
    }
    const decoder = new TextDecoder();
    let buffered = "";
    const reader = response.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end = buffered.indexOf("\n\n");
      while (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const fields = new Map<string, string>();
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart());
        }
        const data = fields.get("data");
        if (data !== undefined) {
          events.push({
            id: fields.get("id") ?? "",
            event: fields.get("event") ?? "message",
            data: JSON.parse(data),
          });
        }
        end = buffered.indexOf("\n\n");
      }
      if (events.length >= options.count) {
        await reader.cancel();
        break;
      }
    }
    return { status: response.status, headers: response.headers, events };
  } catch (error) {
    if ((error as Error).name === "AbortError") throw new Error(`the stream ${url} ended early`);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** A GraphQL subscription over SSE (graphql-yoga's "distinct connections" mode), read as it comes. */
export interface GraphqlSubscription {
  status: number;
  /** The next result (`{ data }` or `{ errors }`); undefined once the stream ended. */
  next(): Promise<Record<string, unknown> | undefined>;
  /** Hangs up. */
  close(): Promise<void>;
}

export async function subscribeGraphql(url: string, query: string): Promise<GraphqlSubscription> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ query }),
  });
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const results: Record<string, unknown>[] = [];
  let ended = false;
  return {
    status: response.status,
    async next() {
      while (results.length === 0 && !ended) {
        const { value, done } = await reader.read();
        if (done) {
          ended = true;
          break;
        }
        buffered += decoder.decode(value, { stream: true });
        let end = buffered.indexOf("\n\n");
        while (end >= 0) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const event = /^event: (.+)$/m.exec(block)?.[1];
          const data = /^data: (.+)$/m.exec(block)?.[1];
          if (event === "complete") ended = true;
          else if (data) results.push(JSON.parse(data));
          end = buffered.indexOf("\n\n");
        }
      }
      return results.shift();
    },
    async close() {
      await reader.cancel().catch(() => {});
    },
  };
}
