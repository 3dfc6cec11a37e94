import type { Database } from "../../../api/db/connect.ts";
import type { ReceivedWebhook } from "../webhookReceiver.ts";

export type WebhookDiscrepancyKind =
  | "claim_change_without_event"
  | "webhook_event_not_delivered"
  | "webhook_events_out_of_order"
  | "webhook_unknown_event"
  | "webhook_delivery_failed";

export interface WebhookCount {
  /** Events the database wrote with the state changes (claims' and unmatched transfers'). */
  events: number;
  /** Of them, received (verified) at least once by the operator's receiver. */
  delivered: number;
  /** Requests the receiver verified beyond the first of each event: retries after a crash. */
  receivedAgain: number;
  discrepancies: { kind: WebhookDiscrepancyKind; detail: string }[];
}

const STATUS_OF_EVENT: Record<string, string> = {
  "claim.created": "awaiting_payment",
  "claim.paid": "paid",
  "claim.paying": "paying",
  "claim.completed": "completed",
  "claim.expired": "expired",
  "claim.failed": "failed",
};

/**
 * Webhook deliveries counted against the state changes (docs/events.md): every claim's events
 * begin with its creation and end with its status now (the events are the changes, written in
 * their transactions); every event reached the operator's receiver at least once, signed; the
 * first arrivals of one claim's events came in the order of its changes; nothing arrived that the
 * database did not write; no delivery was given up.
 */
export async function countWebhookDeliveries(
  sql: Database,
  received: ReceivedWebhook[],
): Promise<WebhookCount> {
  const discrepancies: WebhookCount["discrepancies"] = [];
  const events = await sql<{ id: bigint; type: string; claim_id: string | null }[]>`
    select id, type, claim_id from app.events order by id`;
  const claims = await sql<{ id: string; status: string }[]>`select id, status from app.claims`;

  const claimEvents = new Map<string, { id: bigint; type: string }[]>();
  for (const event of events) {
    if (event.claim_id === null || event.type === "payment.unmatched") continue;
    const list = claimEvents.get(event.claim_id) ?? [];
    list.push(event);
    claimEvents.set(event.claim_id, list);
  }
  for (const claim of claims) {
    const list = claimEvents.get(claim.id) ?? [];
    if (
      list[0]?.type !== "claim.created" ||
      STATUS_OF_EVENT[list.at(-1)?.type ?? ""] !== claim.status
    ) {
      discrepancies.push({
        kind: "claim_change_without_event",
        detail: `${claim.id} is ${claim.status}; its events: ${list.map((event) => event.type).join(", ") || "none"}`,
      });
    }
  }

  const firstArrival = new Map<string, number>();
  received.forEach((webhook, index) => {
    if (!firstArrival.has(webhook.id)) firstArrival.set(webhook.id, index);
  });
  const written = new Set(events.map((event) => `evt_${event.id}`));
  for (const id of firstArrival.keys()) {
    if (!written.has(id)) discrepancies.push({ kind: "webhook_unknown_event", detail: id });
  }
  let delivered = 0;
  for (const event of events) {
    if (firstArrival.has(`evt_${event.id}`)) delivered += 1;
    else {
      discrepancies.push({
        kind: "webhook_event_not_delivered",
        detail: `evt_${event.id} ${event.type} of ${event.claim_id ?? "no claim"}`,
      });
    }
  }
  for (const [claimId, list] of claimEvents) {
    const arrivals = list
      .map((event) => firstArrival.get(`evt_${event.id}`))
      .filter((index) => index !== undefined);
    if (arrivals.some((index, at) => at > 0 && index < (arrivals[at - 1] as number))) {
      discrepancies.push({
        kind: "webhook_events_out_of_order",
        detail: `${claimId}: ${list.map((event) => event.type).join(", ")} arrived as ${arrivals.join(", ")}`,
      });
    }
  }
  const failed = await sql<{ id: bigint; event_id: bigint; last_error: string | null }[]>`
    select id, event_id, last_error from app.webhook_deliveries where status = 'failed'`;
  for (const delivery of failed) {
    discrepancies.push({
      kind: "webhook_delivery_failed",
      detail: `delivery ${delivery.id} of evt_${delivery.event_id}: ${delivery.last_error}`,
    });
  }
  return {
    events: events.length,
    delivered,
    receivedAgain: received.length - firstArrival.size,
    discrepancies,
  };
}
