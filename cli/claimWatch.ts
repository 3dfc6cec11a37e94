import { setTimeout as sleep } from "node:timers/promises";
import type { z } from "zod";
import { claimEventEnvelope } from "../api/schemas/events.ts";
import type { claimResponse } from "../api/schemas/responses.ts";
import type { ServiceClient } from "./serviceClient.ts";
import { terminalSafeJson } from "./terminalText.ts";

type Claim = z.output<typeof claimResponse>;

/**
 * A claim's states as they happen, from the service's event stream
 * (GET /api/claims/{id}/events, docs/events.md#live-streams): each `claim.*` event's claim, first
 * those so far, then each change. A stream that ends or breaks is opened again after the last
 * event received (Last-Event-ID); a service without the stream (404) is polled every `pollMs`.
 */
export async function* watchClaim(
  service: ServiceClient,
  claimId: string,
  read: () => Promise<Claim>,
  pollMs: number,
): AsyncGenerator<Claim> {
  let lastEventId: string | undefined;
  let streamed = true;
  for (;;) {
    if (!streamed) {
      await sleep(pollMs);
      yield await read();
      continue;
    }
    let response: Response;
    try {
      response = await service.send(`/api/claims/${claimId}/events`, {
        headers: {
          accept: "text/event-stream",
          ...(lastEventId ? { "last-event-id": lastEventId } : {}),
        },
        timeoutMs: 0,
      });
    } catch {
      await sleep(pollMs);
      yield await read();
      continue;
    }
    if (response.status === 404 || response.status === 405 || !response.body) {
      streamed = false;
      await response.body?.cancel();
      continue;
    }
    if (!response.ok) {
      await response.body.cancel();
      await sleep(pollMs);
      continue;
    }
    try {
      for await (const event of serverSentEvents(response.body)) {
        if (event.id) lastEventId = event.id;
        const envelope = claimEventEnvelope.safeParse(terminalSafeJson(JSON.parse(event.data)));
        if (envelope.success) yield envelope.data.data;
      }
    } catch {
      // The connection broke: open it again after the last event received.
    }
    await sleep(Math.min(pollMs, 1_000));
  }
}

/** The events of a text/event-stream body, per the SSE format (comments and retry ignored). */
async function* serverSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<{ id?: string; event?: string; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const fields = new Map<string, string[]>();
        for (const line of block.split("\n")) {
          const colon = line.indexOf(":");
          if (colon <= 0) continue;
          const name = line.slice(0, colon);
          fields.set(name, [...(fields.get(name) ?? []), line.slice(colon + 1).replace(/^ /, "")]);
        }
        const data = fields.get("data");
        if (data)
          yield {
            id: fields.get("id")?.at(-1),
            event: fields.get("event")?.at(-1),
            data: data.join("\n"),
          };
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
