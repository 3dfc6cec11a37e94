import { crashIfConfigured } from "../crashHook.ts";
import { eventEnvelope, eventId, type StoredEvent } from "../events/eventEnvelope.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import type { OutgoingWebhook, WebhookOutcome, WebhookTransport } from "./sendWebhook.ts";
import {
  type DeliveryResult,
  type DueDelivery,
  fanOutEvents,
  recordDeliveryResults,
  takeDueDeliveries,
} from "./webhookDeliveries.ts";

/**
 * The delivery worker: turns new events into deliveries, then sends what is due, WEBHOOK_CONCURRENCY
 * at a time, and writes what each came to. Woken by every event's NOTIFY; the interval finds
 * retries that came due. At least once: a delivery is leased and its attempt counted before it
 * is sent, so a crash at any point sends it again later, marked as a redelivery, never loses it.
 */
/**
 * The body of an A2A push notification for an event (a surface's protocol, given by the
 * composition root: this worker knows no protocol but the envelope's).
 */
export type A2aPushBody = (
  event: StoredEvent,
  ids: { taskId: string; contextId: string },
) => { body: string; contentType: string };

export function createWebhookWorker(
  deps: ServiceDeps,
  transport: WebhookTransport,
  a2aPushBody?: A2aPushBody,
): Worker {
  const { config, sql, logger } = deps;
  const settings = config.webhooks;
  // Long enough that a delivery still in flight is never taken again by the next tick.
  const leaseMs = settings.timeoutMs * 2 + 5_000;
  const log = logger.child({ worker: "webhooks" });
  return {
    name: "webhooks",
    lockKey: LOCK_KEYS.webhookSender,
    intervalMs: settings.intervalMs,
    wakeChannel: WAKE_CHANNELS.events,
    async tick() {
      const fannedOut = await fanOutEvents(sql);
      const due = await takeDueDeliveries(sql, settings.concurrency, leaseMs);
      if (due.length === 0) return fannedOut > 0;
      crashIfConfigured(config, "before_webhooks_sent");
      const results = await Promise.all(due.map((delivery) => send(delivery)));
      crashIfConfigured(config, "after_webhooks_sent");
      const disabled = await recordDeliveryResults(sql, results, settings);
      for (const id of disabled) log.warn({ endpoint: id }, "webhook endpoint disabled");
      return true;
    },
  };

  /** A send that throws (a header Node refuses, say) is a failed attempt, not a stuck lease. */
  async function sendOne(webhook: OutgoingWebhook): Promise<WebhookOutcome> {
    try {
      return await transport.send(webhook);
    } catch (error) {
      return { ok: false, status: null, error: (error as Error).message };
    }
  }

  async function send(delivery: DueDelivery): Promise<DeliveryResult> {
    const pushed =
      delivery.kind === "a2a" && a2aPushBody && delivery.task_id
        ? a2aPushBody(delivery.event, {
            taskId: delivery.task_id,
            contextId: delivery.context_id ?? "",
          })
        : { body: JSON.stringify(eventEnvelope(config, delivery.event)), contentType: undefined };
    const outcome = await sendOne({
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
    });
    if (!outcome.ok) {
      log.info(
        { delivery: String(delivery.id), endpoint: delivery.endpoint_id, error: outcome.error },
        "webhook delivery failed",
      );
    }
    return { delivery, outcome };
  }
}
