import { createHash } from "node:crypto";
import { encodePaymentResponseHeader } from "@x402/core/http";
import type { PaymentRequired, VerifyResponse } from "@x402/core/types";
import { VerifyError } from "@x402/core/types";
import type { Hex } from "viem";
import { insertClaim } from "../claims/insertClaim.ts";
import { refusedPayoutAddress } from "../claims/payoutAddressRule.ts";
import { type ClaimDetails, readClaim } from "../claims/readClaim.ts";
import { type CompletionSignal, waitForClaim } from "../claims/waitForClaim.ts";
import { crashIfConfigured } from "../crashHook.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";
import {
  recordAuthorization,
  recordSettlementUnknown,
  STALE_MARGIN_MS,
} from "../lifecycle/x402Records.ts";
import type { PaymentRefusalReason } from "../reasons/reasonCatalog.ts";
import {
  type InvalidRequest,
  invalidField,
  invalidRequest,
  type Refusal,
} from "../reasons/refusal.ts";
import { readReceipt, type StoredReceipt } from "../receipts/readReceipt.ts";
import { x402EarnRequest } from "../schemas/inputs.ts";
import { parseInput } from "../schemas/parseInput.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { SETTLE_WITH_PAYOUT_MIN_SECONDS, signedAuthorizationOf } from "./paymentAuthorization.ts";
import { type CheckedPayment, checkPaymentHeader } from "./paymentPayload.ts";
import { refusalCode } from "./refusalReasons.ts";
import { settlementErrorOutcome, settlementOutcome } from "./settlementOutcome.ts";
import { findSettlementTransfer } from "./settlementTransfer.ts";
import { waitForSettlementWithPayout } from "./settleWithPayout.ts";
import {
  readX402Payment,
  readX402PaymentByIdentifier,
  recordSettled,
  recordSettlementFailed,
  type X402Payment,
} from "./x402Payments.ts";
import type { X402Runtime } from "./x402Runtime.ts";
import { PAYMENT_REQUIRED, type X402Terms } from "./x402Terms.ts";

/** What happened, for each transport to write out (core returns data, adapters write it). */
export type EarnResult =
  | InvalidRequest
  | Extract<Refusal, { type: "payment_already_used" | "payment_identifier_conflict" }>
  | { type: "x402_disabled" }
  | { type: "facilitator_unavailable" }
  | { type: "payment_required"; paymentRequired: PaymentRequired }
  | {
      type: "payment_refused";
      reason: PaymentRefusalReason;
      paymentRequired: PaymentRequired;
    }
  | {
      type: "paid";
      claim: ClaimDetails;
      /** Null when the payout was not mined within the bounded wait. */
      receipt: StoredReceipt | null;
      paymentResponse: string | null;
    }
  | { type: "settlement_unknown"; claim: ClaimDetails };

/** The internal steps' outcome: the claim is read once, at the end. */
type Outcome =
  | Exclude<EarnResult, { type: "paid" | "settlement_unknown" }>
  | { type: "paid"; claimId: string; paymentResponse: string | null }
  | { type: "settlement_unknown"; claimId: string };

export interface X402Deps extends ServiceDeps {
  x402: X402Runtime | null;
  /** Wakes the wait for the payout at each completion (the core's; polled without it). */
  completions?: CompletionSignal;
}

/**
 * Pay and earn in one call (POST /api/x402/earn, the MCP tool, the A2A skill; DESIGN.md §8).
 * The body is checked first (an invalid payout address is never asked to pay). Without a
 * payment: the terms. With one: check it, have the facilitator verify it, record (payer,
 * nonce) with a new claim, SETTLE, and only then let the payout happen; wait a bounded time
 * for the payout and its receipt. The same payment again (a replay, or a concurrent twin, on
 * any transport) finds its record and gets the same claim: never settled or paid twice.
 *
 * The payer's signature covers the payment, not the request body: whoever sends a
 * PAYMENT-SIGNATURE first chooses the payout address. A replay naming another one is refused
 * (`payment_already_used`) rather than silently given the first claim. A client that sends a
 * payment-identifier id gets, for the same id and the same request (`requestFingerprint`), the
 * first answer even with a newly signed payment, which is then never settled; the same id with
 * another request is `payment_identifier_conflict`.
 */
export async function earnWithX402(
  deps: X402Deps,
  body: unknown,
  paymentHeader: string | undefined,
): Promise<EarnResult> {
  const outcome = await earn(deps, body, paymentHeader);
  if (outcome.type !== "paid" && outcome.type !== "settlement_unknown") return outcome;
  const claim = await readClaim(deps.sql, outcome.claimId);
  if (!claim) throw new Error(`x402 claim ${outcome.claimId} vanished`);
  if (outcome.type === "settlement_unknown") return { type: "settlement_unknown", claim };
  return {
    type: "paid",
    claim,
    receipt: claim.status === "completed" ? await readReceipt(deps.sql, claim.id) : null,
    paymentResponse: outcome.paymentResponse,
  };
}

async function earn(
  deps: X402Deps,
  body: unknown,
  paymentHeader: string | undefined,
): Promise<Outcome> {
  const input = parseInput(x402EarnRequest, body);
  if (!input.ok) return invalidRequest(input.errors);
  const request = input.value;
  const refusal = refusedPayoutAddress(deps.config, request.payout_address);
  if (refusal) return invalidField("payout_address", refusal);
  if (!deps.x402) return { type: "x402_disabled" };
  const { facilitator } = deps.x402;

  let terms: X402Terms;
  try {
    terms = await deps.x402.terms();
  } catch (error) {
    deps.logger.warn({ err: error }, "x402 terms unavailable (facilitator unreachable?)");
    return { type: "facilitator_unavailable" };
  }
  if (!paymentHeader) {
    return {
      type: "payment_required",
      paymentRequired: await terms.paymentRequired(PAYMENT_REQUIRED),
    };
  }
  const refused = async (reason: string): Promise<Outcome> => ({
    type: "payment_refused",
    reason: refusalCode(reason),
    paymentRequired: await terms.paymentRequired(reason),
  });

  const checked = checkPaymentHeader(paymentHeader, terms);
  if (!checked.ok) return refused(checked.reason);
  const payment = checked.payment;
  const fingerprint = requestFingerprint(payment, request);
  const again = (known: X402Payment) =>
    answerAgain(
      deps,
      { payment, payoutAddress: request.payout_address, fingerprint },
      known,
      refused,
    );

  // This payment as a request before it recorded it (by its authorization, or by its
  // payment identifier: only verified payments are recorded, so a record under (payer, id) is
  // the payer's own).
  const recorded = async () =>
    (await readX402Payment(deps.sql, payment.payer, payment.nonce)) ??
    (payment.paymentIdentifier
      ? await readX402PaymentByIdentifier(deps.sql, payment.payer, payment.paymentIdentifier)
      : null);
  const known = await recorded();
  if (known) return again(known);

  // A refusal may be a concurrent twin's doing: it recorded and settled this very authorization
  // while this request verified it (then the nonce is used). Answer as the twin does.
  const refusedUnlessTwin = async (reason: string): Promise<Outcome> => {
    const twin = await recorded();
    return twin ? again(twin) : refused(reason);
  };
  let verdict: VerifyResponse;
  try {
    await facilitator.checkReady();
    verdict = await facilitator.client.verify(payment.payload, payment.requirements);
  } catch (error) {
    if (error instanceof VerifyError) {
      return refusedUnlessTwin(error.invalidReason ?? "invalid_payment");
    }
    deps.logger.warn({ err: error }, "x402 verify could not be done");
    return { type: "facilitator_unavailable" };
  }
  if (!verdict.isValid) return refusedUnlessTwin(verdict.invalidReason ?? "invalid_payment");

  // With the local facilitator and SettleAndPay, the payout sender settles the authorization in
  // its payout's transaction (docs/payments.md#one-transaction-settlement); a remote facilitator,
  // a smart wallet's signature (any other than 65 bytes), an address without SettleAndPay's
  // code, or an authorization about to lapse settles first.
  const signed = signedAuthorizationOf(paymentHeader);
  const withPayout =
    deps.x402.facilitator.kind === "local" &&
    signed !== null &&
    leavesTimeToSettleWithPayout(signed.validBefore) &&
    (await deps.x402.settleAndPay.state()) === "verified";
  let claimId: string;
  try {
    claimId = await deps.sql.begin(async (transaction) => {
      const inserted = await insertClaim(transaction, deps.config, {
        flow: "x402",
        payoutAddress: request.payout_address,
        email: request.email,
        agentName: request.agent_name,
      });
      if (inserted.type !== "created") throw new Error(`x402 claim not created: ${inserted.type}`);
      await recordAuthorization(transaction, {
        payer: payment.payer,
        nonce: payment.nonce,
        claimId: inserted.claim.id,
        digest: payment.digest,
        value: payment.value,
        paymentHeader,
        paymentIdentifier: payment.paymentIdentifier,
        requestFingerprint: fingerprint,
        settleWithPayout: withPayout,
      });
      if (withPayout) await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
      return inserted.claim.id;
    });
  } catch (error) {
    // A concurrent twin of this payment (or of its payment identifier) recorded it first:
    // answer as it does.
    if (!hasSqlState(error, SQL_STATE.uniqueViolation)) throw error;
    const twin = await recorded();
    if (!twin) throw error;
    return again(twin);
  }

  crashIfConfigured(deps.config, "after_x402_recorded");
  if (withPayout) return settledWithPayout(deps, claimId, refused);
  return settle(deps, payment, claimId, refused);
}

/**
 * The facilitator verifies an authorization valid for 6 s more, and the payout sender signs none
 * within SETTLE_MARGIN_SECONDS (10 s) of its end (paymentAuthorization.ts). One that verified in between was recorded to
 * settle with its payout, skipped by the sender, and held a place in its rounds until it lapsed:
 * a payer with 10 USDC could keep the rounds full of them for nothing, and hold back every
 * other settle-and-pay. Those settle first, with the facilitator, at once.
 */
function leavesTimeToSettleWithPayout(validBefore: bigint): boolean {
  const now = BigInt(Math.floor(Date.now() / 1000));
  return validBefore > now + SETTLE_WITH_PAYOUT_MIN_SECONDS;
}

/** The payout sender settles and pays out in one transaction; the request waits for it. */
async function settledWithPayout(
  deps: X402Deps,
  claimId: string,
  refused: (reason: string) => Promise<Outcome>,
): Promise<Outcome> {
  const outcome = await waitForSettlementWithPayout(
    deps.sql,
    claimId,
    deps.config.x402.settleTimeoutMs,
    deps.completions,
  );
  if (outcome.kind === "failed") return refused(outcome.reason);
  if (outcome.kind === "unknown") {
    deps.logger.warn({ claimId }, "x402 settlement with its payout: outcome unknown");
    return { type: "settlement_unknown", claimId };
  }
  return { type: "paid", claimId, paymentResponse: outcome.paymentResponse };
}

async function settle(
  deps: X402Deps,
  payment: CheckedPayment,
  claimId: string,
  refused: (reason: string) => Promise<Outcome>,
): Promise<Outcome> {
  const facilitator = (deps.x402 as X402Runtime).facilitator;
  const outcome = await facilitator.client
    .settle(payment.payload, payment.requirements)
    .then(settlementOutcome, settlementErrorOutcome);
  if (outcome.kind === "failed") {
    await recordSettlementFailed(deps.sql, claimId, outcome.reason);
    return refused(outcome.reason);
  }
  if (outcome.kind === "unknown") {
    // It may or may not have settled. Not a failure, and never a second charge: the claim
    // stays on record and the chain decides (the matcher pays it by its authorization).
    deps.logger.warn(
      { claimId, txHash: outcome.txHash, detail: outcome.detail },
      "x402 settlement outcome unknown",
    );
    facilitator.resetNonces();
    await recordSettlementUnknown(deps.sql, claimId, outcome.txHash);
    return { type: "settlement_unknown", claimId };
  }
  const result = outcome.response;

  crashIfConfigured(deps.config, "after_x402_settled");
  const paymentResponse = encodePaymentResponseHeader(result);
  const transfer = await findSettlementTransfer(deps, result.transaction as Hex, payment).catch(
    (error: unknown) => {
      deps.logger.warn({ err: error, claimId }, "settlement transfer not readable yet");
      return null;
    },
  );
  await recordSettled(deps.sql, claimId, { txHash: result.transaction, paymentResponse }, transfer);
  await waitForClaim(deps.sql, claimId, deps.config.x402.payoutWaitMs, deps.completions);
  return { type: "paid", claimId, paymentResponse };
}

/**
 * What identifies an x402 request beyond its signature: the payer, what the body asks for and
 * the terms paid. A payment-identifier id is bound to it.
 */
function requestFingerprint(
  payment: CheckedPayment,
  request: { payout_address: string; email?: string | undefined; agent_name?: string | undefined },
): string {
  const { network, asset, amount, payTo } = payment.requirements;
  return createHash("sha256")
    .update(
      JSON.stringify([
        payment.payer,
        request.payout_address.toLowerCase(),
        request.email ?? null,
        request.agent_name ?? null,
        network,
        asset.toLowerCase(),
        amount,
        payTo.toLowerCase(),
      ]),
    )
    .digest("hex");
}

/**
 * The same payment again, or the same payment identifier: never settle twice; answer with what
 * the first one got, unless the request is another one (another payout address; for an
 * identifier, another fingerprint).
 */
async function answerAgain(
  deps: X402Deps,
  sent: { payment: CheckedPayment; payoutAddress: string; fingerprint: string },
  known: X402Payment,
  refused: (reason: string) => Promise<Outcome>,
): Promise<Outcome> {
  const { payment } = sent;
  const statusUrl = `${deps.config.http.publicUrl}/api/claims/${known.claimId}`;
  const sameNonce = known.nonce === payment.nonce;
  if (!sameNonce) {
    // Found by its payment identifier: a retry of the same request, or a conflict.
    if (known.requestFingerprint !== sent.fingerprint) {
      return { type: "payment_identifier_conflict", claimId: known.claimId, statusUrl };
    }
  } else {
    if (known.digest !== payment.digest) return refused("invalid_exact_evm_nonce_already_used");
    if (known.payoutAddress !== sent.payoutAddress.toLowerCase()) {
      return { type: "payment_already_used", claimId: known.claimId, statusUrl };
    }
  }
  const nonce = known.nonce;
  let record: X402Payment | null = known;
  // A twin may be settling right now: wait for its outcome rather than race it, as long as a
  // settlement can take. A record still `settling` after that belongs to a process that died
  // mid-way: its outcome is unknown (the chain will tell the matcher), never settled again.
  const deadline = known.updatedAt.getTime() + deps.config.x402.settleTimeoutMs + STALE_MARGIN_MS;
  while (record?.status === "settling" && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    record = await readX402Payment(deps.sql, payment.payer, nonce);
  }
  if (record?.status === "settling") {
    await recordSettlementUnknown(deps.sql, known.claimId, null);
    return { type: "settlement_unknown", claimId: known.claimId };
  }
  if (!record || record.status === "unknown") {
    return { type: "settlement_unknown", claimId: known.claimId };
  }
  if (record.status === "failed") return refused(record.failureReason ?? "settlement_failed");
  await waitForClaim(deps.sql, known.claimId, deps.config.x402.payoutWaitMs, deps.completions);
  return { type: "paid", claimId: known.claimId, paymentResponse: record.paymentResponse };
}
