import {
  NOT_QUALIFYING_REASONS,
  type NotQualifyingReason,
  PAYMENT_REFUSAL_REASONS,
  type PaymentRefusalReason,
  PROBLEM_REASONS,
  type ProblemCode,
} from "./reasonCatalog.ts";

/** One input field that is wrong, and how (`field` is a dotted path; "" for the whole body). */
export interface FieldError {
  field: string;
  message: string;
}

/** The errors as one line: `payout_address: must be …; email: …`. */
export function describeFieldErrors(errors: FieldError[]): string {
  return errors.map((error) => `${error.field || "body"}: ${error.message}`).join("; ");
}

/**
 * A use-case's "no", as data: which reason (a code of the catalog) and the facts that go with
 * it. Use-cases return these inside their tagged results; surfaces turn them into their
 * protocol's error with `describeRefusal`, never with words of their own.
 */
export type Refusal =
  | { type: "invalid_request"; errors: FieldError[] }
  | { type: "claim_not_found"; claimId: string }
  | { type: "claim_expired" }
  | { type: "claim_not_open"; claimStatus: string }
  | { type: "tx_already_used" }
  | { type: "tx_not_qualifying"; reason: NotQualifyingReason }
  | { type: "x402_claim_not_attachable" }
  | { type: "receipt_not_ready"; claimStatus: string; statusUrl: string }
  | { type: "too_many_open_claims"; limit: number }
  | { type: "too_many_open_tasks"; limit: number }
  | { type: "too_many_streams"; limit: number }
  | { type: "temporarily_unavailable"; retryAfterSeconds: number }
  | { type: "payment_already_used"; claimId: string; statusUrl: string }
  | { type: "payment_identifier_conflict"; claimId: string; statusUrl: string }
  | { type: "tx_not_found" }
  | { type: "facilitator_unavailable" }
  | { type: "x402_disabled" };

/** A refusal as every surface shows it: catalog code, status, title, detail, extra fields. */
export interface RefusalDescription {
  code: ProblemCode;
  status: number;
  title: string;
  detail: string | undefined;
  /** Snake_case facts for the client (REST problem members, MCP/A2A error data). */
  fields: Record<string, unknown>;
  /** Seconds a client should wait before trying again, where that helps. */
  retryAfterSeconds?: number;
}

export type InvalidRequest = Extract<Refusal, { type: "invalid_request" }>;

export function invalidRequest(errors: FieldError[]): InvalidRequest {
  return { type: "invalid_request", errors };
}

/** The invalid_request of one field: `payout_address: that is the service's payout wallet`. */
export function invalidField(field: string, message: string): InvalidRequest {
  return invalidRequest([{ field, message }]);
}

export function describeRefusal(refusal: Refusal): RefusalDescription {
  const reason = PROBLEM_REASONS[refusal.type];
  const base = {
    code: refusal.type,
    status: reason.status,
    title: reason.title,
    detail: "detail" in reason ? (reason.detail as string) : undefined,
    fields: {} as Record<string, unknown>,
  };
  switch (refusal.type) {
    case "invalid_request":
      return {
        ...base,
        detail: describeFieldErrors(refusal.errors),
        fields: { errors: refusal.errors },
      };
    case "claim_not_found":
      return { ...base, detail: `There is no claim ${refusal.claimId}.` };
    case "claim_not_open":
      return {
        ...base,
        detail: `The claim is ${refusal.claimStatus}; a transaction can only be attached while it awaits payment.`,
        fields: { claim_status: refusal.claimStatus },
      };
    case "tx_not_qualifying":
      return {
        ...base,
        detail: NOT_QUALIFYING_REASONS[refusal.reason],
        fields: { reason: refusal.reason },
      };
    case "receipt_not_ready":
      return {
        ...base,
        detail:
          refusal.claimStatus === "failed" || refusal.claimStatus === "expired"
            ? `The claim is ${refusal.claimStatus}; it will not get a receipt.`
            : `The claim is ${refusal.claimStatus}; the receipt exists once it is completed.`,
        fields: { claim_status: refusal.claimStatus, status_url: refusal.statusUrl },
      };
    case "too_many_open_claims":
      return {
        ...base,
        detail: `At most ${refusal.limit} open unpaid claims per client (an IP address, an IPv6 /48, a mail sender). Pay one, or wait for one to expire; asking again for the same payout address gives its open claim back.`,
        fields: { limit: refusal.limit },
        retryAfterSeconds: 3600,
      };
    case "too_many_open_tasks":
      return {
        ...base,
        detail: `At most ${refusal.limit} A2A tasks per client (an IP address, an IPv6 /48) may wait for an x402 payment. Pay one (a message on it with the payment), or cancel one.`,
        fields: { limit: refusal.limit },
        retryAfterSeconds: 3600,
      };
    case "too_many_streams":
      return {
        ...base,
        detail: `At most ${refusal.limit} live event streams per client address at once. Close one; a stream resumes where it stopped with Last-Event-ID.`,
        fields: { limit: refusal.limit },
        retryAfterSeconds: 30,
      };
    case "facilitator_unavailable":
      return { ...base, retryAfterSeconds: 5 };
    case "temporarily_unavailable":
      return {
        ...base,
        detail: `Too many reads that ask the chain are running; try again in ${refusal.retryAfterSeconds} s.`,
        retryAfterSeconds: refusal.retryAfterSeconds,
      };
    case "payment_already_used":
      return {
        ...base,
        detail: `This payment already paid claim ${refusal.claimId}, for another payout address. An x402 payment's signature does not cover the payout address: the first request with it chose the address, and a payment pays one claim. Nothing more was charged.`,
        fields: { claim_id: refusal.claimId, status_url: refusal.statusUrl },
      };
    case "payment_identifier_conflict":
      return {
        ...base,
        detail: `This payment identifier was first used (claim ${refusal.claimId}) with another request: another payout address, email, agent name or payment terms. Use a new identifier for a new request. Nothing was charged.`,
        fields: { claim_id: refusal.claimId, status_url: refusal.statusUrl },
      };
    default:
      return base;
  }
}

/** Words for an x402 payment refusal, for every transport that carries x402. */
export function paymentRefusalWords(reason: PaymentRefusalReason): string {
  return `${PAYMENT_REFUSAL_REASONS[reason]} No claim was opened and nothing was paid out.`;
}
