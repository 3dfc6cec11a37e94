import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { clientAddress } from "../rateLimits/clientAddress.ts";
import { sendRefusal } from "../web/problem.ts";

/** A comment line this often keeps the socket from counting as idle (HTTP_IDLE_TIMEOUT_MS). */
const HEARTBEAT_MS = 15_000;

/**
 * GET /api/claims/{id}/events: the claim's events as Server-Sent Events, each `id` the event's
 * number, `event` its type and `data` its envelope (the webhook's body). A client that comes back
 * with `Last-Event-ID` gets what it missed first (docs/events.md#live-streams). The stream ends
 * after EVENT_STREAM_MAX_SECONDS; EventSource reconnects and resumes by itself.
 */
export function claimEventsRoutes({ core }: SurfaceContext): Router {
  const router = Router();
  router.get("/api/claims/:claimId/events", async (request, response) => {
    // Counted per /48, as creations and reads are: one holder of a /48 has 65,536 /64s.
    const client = clientAddress(request.ip, 48);
    // A client may hang up while the stream is opened: seen here, its slot is given back at
    // once rather than held with a heartbeat that writes to nobody.
    let hungUp = false;
    const hangUp = () => {
      hungUp = true;
    };
    response.once("close", hangUp);
    const result = await core.openClaimEventStream(
      request.params.claimId,
      request.get("last-event-id") ?? (request.query.last_event_id as string | undefined),
      client,
    );
    response.off("close", hangUp);
    if (result.type !== "stream") {
      if (!hungUp) sendRefusal(response, result);
      return;
    }
    const { stream } = result;
    if (hungUp || response.destroyed) {
      stream.close();
      return;
    }
    response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      // no-transform: the compression middleware leaves the stream unbuffered.
      "cache-control": "no-store, no-transform",
      "x-accel-buffering": "no",
    });
    response.write(`retry: 2000\n\n`);
    const heartbeat = setInterval(() => response.write(": keep-alive\n\n"), HEARTBEAT_MS);
    const end = setTimeout(() => response.end(), stream.endsAt.getTime() - Date.now());
    const close = () => {
      clearInterval(heartbeat);
      clearTimeout(end);
      stream.close();
    };
    response.on("close", close);
    stream.start(({ id, envelope }) => {
      response.write(`id: ${id}\nevent: ${envelope.type}\ndata: ${JSON.stringify(envelope)}\n\n`);
    });
  });
  return router;
}
