import type { ClaimDetails, ClaimReader } from "../claims/readClaim.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Refusal } from "../reasons/refusal.ts";
import { CLAIM_ID_PATTERN } from "../schemas/inputs.ts";
import { claimOfEvent, type EventEnvelope, eventEnvelope } from "./eventEnvelope.ts";
import type { EventStreams } from "./eventStreams.ts";
import type { StreamSlots } from "./streamSlots.ts";

/** A claim's live events for one client: what the SSE route and GraphQL subscriptions write. */
export interface ClaimEventStream {
  /** Calls `onEvent` for each event after the one resumed from, in order, until `close()`. */
  start(
    onEvent: (event: { id: string; envelope: EventEnvelope; claim: ClaimDetails | null }) => void,
  ): void;
  /** When the stream must end (EVENT_STREAM_MAX_SECONDS); the client resumes it. */
  endsAt: Date;
  close(): void;
}

export type OpenClaimEventStreamResult =
  | { type: "stream"; stream: ClaimEventStream }
  | Extract<Refusal, { type: "claim_not_found" } | { type: "too_many_streams" }>;

/**
 * Opens a claim's event stream for `client`, resuming after `lastEventId` (the SSE
 * `Last-Event-ID`: the number of the last event received; anything else starts from the first
 * event). A client holds at most EVENT_STREAMS_PER_CLIENT streams in this process at once.
 */
export function claimEventStreams(deps: {
  config: ServiceConfig;
  readClaim: ClaimReader;
  streams: EventStreams;
  slots: StreamSlots;
}) {
  const limits = deps.config.webhooks.streams;
  return async function openClaimEventStream(
    claimId: string,
    lastEventId: string | undefined,
    client: string,
  ): Promise<OpenClaimEventStreamResult> {
    if (!CLAIM_ID_PATTERN.test(claimId) || !(await deps.readClaim(claimId))) {
      return { type: "claim_not_found", claimId };
    }
    if (!deps.slots.take(client)) return { type: "too_many_streams", limit: limits.perClient };
    let subscription: { close(): void } | undefined;
    let closed = false;
    const afterId = lastEventId && /^\d{1,18}$/.test(lastEventId) ? BigInt(lastEventId) : 0n;
    return {
      type: "stream",
      stream: {
        endsAt: new Date(Date.now() + limits.maxMs),
        start(onEvent) {
          if (closed) return;
          subscription = deps.streams.subscribe(claimId, afterId, (event) =>
            onEvent({
              id: String(event.id),
              envelope: eventEnvelope(deps.config, event),
              claim: claimOfEvent(event),
            }),
          );
        },
        close() {
          if (closed) return;
          closed = true;
          subscription?.close();
          deps.slots.give(client);
        },
      },
    };
  };
}
