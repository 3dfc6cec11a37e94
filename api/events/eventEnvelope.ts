import type { z } from "zod";
import { explorerTx } from "../chain/explorerLinks.ts";
import { claimView } from "../claims/claimView.ts";
import {
  type ClaimDetails,
  type ClaimDetailsRow,
  claimDetailsFromRow,
} from "../claims/readClaim.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { formatUsdcFixed } from "../money.ts";
import { UNMATCHED_REASONS } from "../reasons/reasonCatalog.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import type {
  EVENT_TYPE_NAMES,
  eventEnvelopeSchema,
  unmatchedPaymentSchema,
} from "../schemas/events.ts";

/** What integrators are told, by webhook, A2A push and stream alike (docs/events.md). */
export type EventType = (typeof EVENT_TYPE_NAMES)[number];

/** A row of app.events (migration 0026), as the database wrote it with the change. */
export interface StoredEvent {
  id: bigint;
  type: EventType;
  claim_id: string | null;
  ordering_key: string;
  occurred_at: Date;
  snapshot: Record<string, unknown>;
}

export type EventEnvelope = z.infer<typeof eventEnvelopeSchema>;

/** `evt_` and the row's id: the Standard Webhooks `webhook-id`, the same on every retry. */
export function eventId(event: Pick<StoredEvent, "id">): string {
  return `evt_${event.id}`;
}

/**
 * The stable JSON envelope of an event: `data` is the claim as `GET /api/claims/{id}` shows it
 * (as it was when the event happened), or for `payment.unmatched` the transfer.
 */
export function eventEnvelope(config: ServiceConfig, event: StoredEvent): EventEnvelope {
  const id = eventId(event);
  const time = event.occurred_at.toISOString();
  return event.type === "payment.unmatched"
    ? { id, type: event.type, time, data: unmatchedPayment(config, event.snapshot) }
    : {
        id,
        type: event.type,
        time,
        data: claimView(config, claimDetailsFromRow(claimRowFromSnapshot(event.snapshot))),
      };
}

/** The claim as a `claim.*` event saw it; null for `payment.unmatched`. */
export function claimOfEvent(event: StoredEvent): ClaimDetails | null {
  return event.type === "payment.unmatched"
    ? null
    : claimDetailsFromRow(claimRowFromSnapshot(event.snapshot));
}

/** The snapshot is JSON: its times are strings and its numbers text (api/db/definitions/events.sql). */
function claimRowFromSnapshot(snapshot: Record<string, unknown>): ClaimDetailsRow {
  const row = snapshot as unknown as ClaimDetailsRow & Record<string, string | null>;
  const date = (value: unknown) => (value === null ? null : new Date(value as string));
  return {
    ...row,
    created_at: date(row.created_at) as Date,
    expires_at: date(row.expires_at) as Date,
    paid_at: date(row.paid_at),
    completed_at: date(row.completed_at),
    payment_block: row.payment_block === null ? null : BigInt(row.payment_block),
  };
}

type UnmatchedPayment = z.infer<typeof unmatchedPaymentSchema>;

function unmatchedPayment(config: ServiceConfig, snapshot: Record<string, unknown>) {
  const transfer = snapshot as {
    tx_hash: string;
    log_index: number;
    block_number: string;
    from_address: string;
    value: string;
    reason: keyof typeof UNMATCHED_REASONS;
    claim_id: string | null;
  };
  const payment: UnmatchedPayment = {
    tx_hash: transfer.tx_hash,
    log_index: transfer.log_index,
    block_number: Number(transfer.block_number),
    from: checksummed(transfer.from_address),
    amount_usdc: formatUsdcFixed(BigInt(transfer.value)),
    reason: transfer.reason,
    explanation: UNMATCHED_REASONS[transfer.reason] ?? UNMATCHED_REASONS.no_matching_claim,
    claim_id: transfer.claim_id,
    explorer_url: explorerTx(config, transfer.tx_hash),
  };
  return payment;
}
