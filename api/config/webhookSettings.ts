import { z } from "zod";
import { wholeNumber } from "./settings.ts";

/** Default: retries 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h after the first try (27.6 h). */
const DEFAULT_RETRY_SCHEDULE_MS = "5000,300000,1800000,7200000,18000000,36000000,36000000";

const retrySchedule = z
  .string()
  .regex(/^\d+(,\d+)*$/, { message: "must be milliseconds separated by commas" })
  .transform((value) => value.split(",").map(Number));

/**
 * Events (docs/events.md): webhooks, A2A push notifications and the live streams. Each setting
 * says what it means (`.describe`); docs/configuration.md is written from them.
 */
export const webhookSettings = {
  WEBHOOK_ALLOW_LOOPBACK: z
    .enum(["true", "false"], { message: "must be true or false" })
    .default("false")
    .describe(
      "`true` lets webhooks reach loopback addresses (127.0.0.0/8, ::1): the devnet sets it. Private, link-local and other non-public addresses are refused always.",
    ),
  WEBHOOK_TIMEOUT_MS: wholeNumber(100, 120_000)
    .default(10_000)
    .describe("Time for a webhook receiver to answer, from connecting to the last byte kept."),
  WEBHOOK_MAX_RESPONSE_BYTES: wholeNumber(0, 10_485_760)
    .default(65_536)
    .describe("Bytes of a receiver's answer read at most; the connection is closed past them."),
  WEBHOOK_RETRY_SCHEDULE_MS: retrySchedule
    .default(retrySchedule.parse(DEFAULT_RETRY_SCHEDULE_MS))
    .describe(
      `Waits before each retry of a failed delivery, each with up to a fifth more or less at random (jitter); after the last, the delivery is failed. Default ${DEFAULT_RETRY_SCHEDULE_MS} (27.6 hours).`,
    ),
  WEBHOOK_DISABLE_AFTER_SECONDS: wholeNumber(0, 30 * 86_400)
    .default(86_400)
    .describe(
      "An endpoint whose deliveries have all failed this long, and that has a delivery out of retries, is disabled (its pending deliveries failed) until an operator redelivers.",
    ),
  WEBHOOK_CONCURRENCY: wholeNumber(1, 1_000)
    .default(32)
    .describe(
      "Deliveries in flight at once (each to its own connection); each slot is filled again as soon as its answer comes.",
    ),
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: wholeNumber(1, 1_000)
    .default(16)
    .describe(
      "Deliveries in flight at once to one endpoint, so that one slow receiver (answering only at `WEBHOOK_TIMEOUT_MS`) cannot take every slot of `WEBHOOK_CONCURRENCY`.",
    ),
  WEBHOOK_INTERVAL_MS: wholeNumber(10, 3_600_000)
    .default(1_000)
    .describe("How often the delivery worker looks for due retries (new events wake it at once)."),
  WEBHOOKS_PER_CLAIM: wholeNumber(0, 10)
    .default(3)
    .describe(
      "Push notification configs one A2A task may have; 0 refuses them and every `webhook_url` (a claim has at most one: a creation naming one opens a claim of its own).",
    ),
  EVENT_RETENTION_DAYS: wholeNumber(2, 3_650)
    .default(30)
    .describe(
      "Events (and their deliveries, failed ones included) are deleted this many days after they happened, once none of their deliveries is pending; a failed delivery can be redelivered until then. At least 2: longer than the retries.",
    ),
  EVENT_STREAMS_PER_CLIENT: wholeNumber(1, 1_000)
    .default(10)
    .describe("Live event streams (SSE, GraphQL subscriptions) one client address holds at once."),
  EVENT_STREAM_MAX_SECONDS: wholeNumber(10, 86_400)
    .default(3_600)
    .describe("A live stream is closed after this long; the client resumes it with Last-Event-ID."),
};

type WebhookSettings = z.output<z.ZodObject<typeof webhookSettings>>;

export function webhookConfig(settings: WebhookSettings) {
  return {
    allowLoopback: settings.WEBHOOK_ALLOW_LOOPBACK === "true",
    timeoutMs: settings.WEBHOOK_TIMEOUT_MS,
    maxResponseBytes: settings.WEBHOOK_MAX_RESPONSE_BYTES,
    retryScheduleMs: settings.WEBHOOK_RETRY_SCHEDULE_MS,
    disableAfterMs: settings.WEBHOOK_DISABLE_AFTER_SECONDS * 1000,
    concurrency: settings.WEBHOOK_CONCURRENCY,
    concurrencyPerEndpoint: settings.WEBHOOK_CONCURRENCY_PER_ENDPOINT,
    intervalMs: settings.WEBHOOK_INTERVAL_MS,
    perClaim: settings.WEBHOOKS_PER_CLAIM,
    retentionMs: settings.EVENT_RETENTION_DAYS * 86_400_000,
    streams: {
      perClient: settings.EVENT_STREAMS_PER_CLIENT,
      maxMs: settings.EVENT_STREAM_MAX_SECONDS * 1000,
    },
  };
}

export type WebhookConfig = ReturnType<typeof webhookConfig>;
