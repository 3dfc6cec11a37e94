import { crashIfConfigured } from "../crashHook.ts";
import { eventEnvelope, eventId, type StoredEvent } from "../events/eventEnvelope.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { wakeOrphanedDeliveries } from "./deliveryLines.ts";
import { PRUNE_BATCH, pruneEvents } from "./eventRetention.ts";
import type { OutgoingWebhook, WebhookOutcome, WebhookTransport } from "./sendWebhook.ts";
import {
  type DeliveryResult,
  type DueDelivery,
  fanOutEvents,
  recordDeliveryResults,
  takeDueDeliveries,
} from "./webhookDeliveries.ts";

/**
 * The body of an A2A push notification for an event (a surface's protocol, given by the
 * composition root: this worker knows no protocol but the envelope's).
 */
export type A2aPushBody = (
  event: StoredEvent,
  ids: { taskId: string; contextId: string },
) => { body: string; contentType: string };

/** How long stopping waits for the sends in flight before giving them up to their leases. */
const STOP_GRACE_MS = 2_000;
/** Old events are deleted at the first tick and then this often (eventRetention.ts). */
const PRUNE_EVERY_MS = 10 * 60_000;
/** Batches of old events deleted in one tick at most, so that answers are not kept waiting. */
const PRUNE_BATCHES_PER_TICK = 2;

/**
 * The delivery worker: turns new events into deliveries, then keeps up to WEBHOOK_CONCURRENCY
 * sends in flight, at most WEBHOOK_CONCURRENCY_PER_ENDPOINT to one endpoint and half of them to
 * strangers' endpoints (claims' and A2A tasks'). Each answer is
 * written as it comes and its slot taken by the next due delivery at once (the answer wakes the
 * loop), so a receiver that holds its connection until WEBHOOK_TIMEOUT_MS holds its own slots
 * only. Woken by every event's NOTIFY; the interval finds retries that came due. Sends start only
 * in a tick, under the worker's lock; when the loop stops holding it, what is in flight is
 * awaited a moment, then given up. At least once: a delivery is leased and its attempt counted
 * before it is sent, so a crash, or a send given up, sends it again when its lease ends, marked
 * as a redelivery; never loses it. At its first tick and every 10 minutes it deletes the events
 * past EVENT_RETENTION_DAYS (eventRetention.ts), a few batches at a time, and wakes any
 * delivery left waiting behind no one (deliveryLines.ts).
 */
export function createWebhookWorker(
  deps: ServiceDeps,
  transport: WebhookTransport,
  a2aPushBody?: A2aPushBody,
): Worker {
  const { config, sql, logger } = deps;
  const settings = config.webhooks;
  // Longer than any send (bounded by the timeout), so a delivery in flight is never taken again.
  const leaseMs = settings.timeoutMs * 2 + 5_000;
  const log = logger.child({ worker: "webhooks" });
  /** The sends in flight, each with what gives it up. */
  const inFlight = new Map<Promise<void>, AbortController>();
  const sendingTo = new Map<string, number>();
  /**
   * Strangers' endpoints (claims' `webhook_url`s, A2A push configs) hold at most half the slots
   * together: anyone may point many claims at a receiver that never answers, and the operator's
   * endpoints keep the rest (docs/events.md#webhooks).
   */
  const strangerSlots = Math.max(1, Math.floor(settings.concurrency / 2));
  let strangersInFlight = 0;
  /** Answers not yet written. */
  const answered: DeliveryResult[] = [];
  let wakeLoop = () => {};
  let prunedAt = Number.NEGATIVE_INFINITY;
  /** The last prune deleted its whole budget: more old events may wait, pruned next tick. */
  let pruneBacklog = false;

  return {
    name: "webhooks",
    lockKey: LOCK_KEYS.webhookSender,
    intervalMs: settings.intervalMs,
    wakeChannels: [WAKE_CHANNELS.events],
    wakeWith(wake) {
      wakeLoop = wake;
    },
    async tick(lock) {
      await writeAnswersOrLog();
      // Neither a failing prune nor a failing fan-out stops the sending of what is due.
      const pruneDue = Date.now() - prunedAt >= PRUNE_EVERY_MS;
      if (pruneDue || pruneBacklog) {
        if (pruneDue) prunedAt = Date.now();
        pruneBacklog = false;
        try {
          await prune(pruneDue);
        } catch (error) {
          log.error({ err: error }, "could not delete old events");
        }
      }
      let fannedOut = 0;
      try {
        fannedOut = await fanOutEvents(sql);
      } catch (error) {
        log.error({ err: error }, "could not turn events into deliveries");
      }
      // Again: answers that came meanwhile are written before their leases can end.
      await writeAnswersOrLog();
      const free = settings.concurrency - inFlight.size;
      if (free <= 0 || lock?.held() === false) return fannedOut > 0;
      const due = await takeDueDeliveries(sql, {
        limit: free,
        perEndpoint: settings.concurrencyPerEndpoint,
        sending: sendingTo,
        strangers: strangerSlots - strangersInFlight,
        leaseMs,
      });
      if (due.length > 0) crashIfConfigured(config, "before_webhooks_sent");
      for (const delivery of due) start(delivery);
      // Slots still free after taking some: the due deliveries of an endpoint that reached its
      // share may have hidden others; look again at once (that endpoint is passed over then).
      return fannedOut > 0 || (due.length > 0 && inFlight.size < settings.concurrency);
    },
    async settle() {
      const waiting = [...inFlight.keys()];
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(waiting),
        new Promise<void>((resolve) => {
          grace = setTimeout(resolve, STOP_GRACE_MS);
        }),
      ]);
      clearTimeout(grace);
      // Given up: not written, so each stays leased and goes again, as a redelivery, when its
      // lease ends.
      for (const send of waiting) inFlight.get(send)?.abort();
      await Promise.all(waiting);
      try {
        await writeAnswers();
      } catch (error) {
        log.warn({ err: error }, "could not write webhook answers");
      }
    },
  };

  /**
   * Old events, a bounded share of the database's time: a backlog is deleted over the next
   * ticks, answers written between them. With `sweep` (every 10 minutes), the lines' safety net.
   */
  async function prune(sweep: boolean) {
    const pruned = await pruneEvents(sql, {
      retentionMs: settings.retentionMs,
      maxBatches: PRUNE_BATCHES_PER_TICK,
    });
    if (pruned > 0) log.info({ pruned }, "old events deleted");
    pruneBacklog = pruned >= PRUNE_BATCHES_PER_TICK * PRUNE_BATCH;
    if (!sweep) return;
    const orphans = await wakeOrphanedDeliveries(sql);
    if (orphans > 0) {
      log.warn({ orphans }, "deliveries waiting behind no one came due: a bug in deliveryLines.ts");
    }
  }

  function start(delivery: DueDelivery) {
    const abort = new AbortController();
    const stranger = delivery.kind !== "operator";
    sendingTo.set(delivery.endpoint_id, (sendingTo.get(delivery.endpoint_id) ?? 0) + 1);
    if (stranger) strangersInFlight += 1;
    // The slot is given back whatever happens, so a throw can neither keep it nor go unhandled.
    const sending = send(delivery, abort.signal)
      .then((result) => {
        crashIfConfigured(config, "after_webhooks_sent");
        if (!abort.signal.aborted) answered.push(result);
      })
      .catch((error: unknown) => {
        log.error({ err: error, delivery: String(delivery.id) }, "webhook send broke");
      })
      .finally(() => {
        inFlight.delete(sending);
        const left = (sendingTo.get(delivery.endpoint_id) ?? 1) - 1;
        if (left > 0) sendingTo.set(delivery.endpoint_id, left);
        else sendingTo.delete(delivery.endpoint_id);
        if (stranger) strangersInFlight -= 1;
        wakeLoop();
      });
    inFlight.set(sending, abort);
  }

  /**
   * Writes the answers that came since the last time, in one transaction. Answers it could not
   * write are not kept: their deliveries stay leased and go again, as redeliveries, when the
   * leases end (one answer the database refuses cannot stop every later one).
   */
  /** A failed write does not stop the sending of what is due: its answers go again by lease. */
  async function writeAnswersOrLog() {
    try {
      await writeAnswers();
    } catch (error) {
      log.error({ err: error }, "could not write webhook answers");
    }
  }

  async function writeAnswers() {
    if (answered.length === 0) return;
    const disabled = await recordDeliveryResults(sql, answered.splice(0), settings);
    for (const id of disabled) log.warn({ endpoint: id }, "webhook endpoint disabled");
  }

  /**
   * Never throws: a body that cannot be built or a send that throws (a header Node refuses,
   * say) is a failed attempt, not a stuck lease.
   */
  async function send(delivery: DueDelivery, signal: AbortSignal): Promise<DeliveryResult> {
    let outcome: WebhookOutcome;
    try {
      outcome = await transport.send(outgoing(delivery, signal));
    } catch (error) {
      outcome = { ok: false, status: null, error: (error as Error).message };
    }
    if (!outcome.ok) {
      log.info(
        { delivery: String(delivery.id), endpoint: delivery.endpoint_id, error: outcome.error },
        "webhook delivery failed",
      );
    }
    return { delivery, outcome };
  }

  function outgoing(delivery: DueDelivery, signal: AbortSignal): OutgoingWebhook {
    const pushed =
      delivery.kind === "a2a" && a2aPushBody && delivery.task_id
        ? a2aPushBody(delivery.event, {
            taskId: delivery.task_id,
            contextId: delivery.context_id ?? "",
          })
        : { body: JSON.stringify(eventEnvelope(config, delivery.event)), contentType: undefined };
    return {
      url: delivery.url,
      secret: delivery.secret,
      signedBy: delivery.kind === "a2a" ? "service" : "secret",
      messageId: eventId(delivery.event),
      body: pushed.body,
      contentType: pushed.contentType,
      attempt: delivery.attempts,
      redelivery: delivery.redelivery,
      extraHeaders: {
        ...(delivery.token ? { "x-a2a-notification-token": delivery.token } : {}),
        ...(delivery.auth_scheme
          ? { authorization: `${delivery.auth_scheme} ${delivery.auth_credentials ?? ""}` }
          : {}),
      },
      signal,
    };
  }
}
