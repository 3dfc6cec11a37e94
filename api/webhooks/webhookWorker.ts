import { crashIfConfigured } from "../crashHook.ts";
import { eventEnvelope, eventId } from "../events/eventEnvelope.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import type { WebhookTransport } from "./sendWebhook.ts";
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
export function createWebhookWorker(deps: ServiceDeps, transport: WebhookTransport): Worker {
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

  async function send(delivery: DueDelivery): Promise<DeliveryResult> {
    const outcome = await transport.send({
      url: delivery.url,
      secret: delivery.secret,
      messageId: eventId(delivery.event),
      body: JSON.stringify(eventEnvelope(config, delivery.event)),
      attempt: delivery.attempts,
      redelivery: delivery.redelivery,
      extraHeaders: delivery.token ? { "x-a2a-notification-token": delivery.token } : undefined,
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
