import { encodePaymentResponseHeader } from "@x402/core/http";
import type { PaymentRequired, SettleResponse, VerifyResponse } from "@x402/core/types";
import { SettleError, VerifyError } from "@x402/core/types";
import type { Address, Hex } from "viem";
import { createClaim, refusedPayoutAddress } from "../claims/createClaim.ts";
import { waitForClaim } from "../claims/waitForClaim.ts";
import { crashIfConfigured } from "../crashHook.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import type { Facilitator } from "./facilitator.ts";
import { type CheckedPayment, checkPaymentHeader } from "./paymentPayload.ts";
import { findSettlementTransfer } from "./settlementTransfer.ts";
import {
  readX402Payment,
  recordAuthorization,
  recordSettled,
  recordSettlementFailed,
  recordSettlementUnknown,
  type X402Payment,
} from "./x402Payments.ts";
import { PAYMENT_REQUIRED, type X402Terms } from "./x402Terms.ts";

export interface EarnRequest {
  payoutAddress: Address;
  agentName?: string | undefined;
  email?: string | undefined;
  /** The PAYMENT-SIGNATURE header, if the client sent one. */
  paymentHeader?: string | undefined;
}

/** What happened, for the HTTP layer to write out (core returns data, adapters write it). */
export type EarnOutcome =
  | { type: "payment_required"; paymentRequired: PaymentRequired }
  | { type: "payment_refused"; reason: string; paymentRequired: PaymentRequired }
  | { type: "invalid_payout_address"; detail: string }
  | { type: "facilitator_unavailable"; detail: string }
  | { type: "paid"; claimId: string; paymentResponse: string | null }
  | { type: "settlement_unknown"; claimId: string };

export interface X402Deps extends ServiceDeps {
  facilitator: Facilitator;
  terms: () => Promise<X402Terms>;
}

const UNIQUE_VIOLATION = "23505";

/**
 * POST /api/x402/earn (DESIGN.md §8). Without a payment: the terms (402). With one: check it,
 * have the facilitator verify it, record (payer, nonce) with a new claim, SETTLE, and only
 * then let the payout happen; wait a bounded time for the payout and its receipt. The same
 * payment again (a replay, or a concurrent twin) finds its record and gets the same claim:
 * it is never settled or paid out twice.
 */
export async function earnWithX402(deps: X402Deps, request: EarnRequest): Promise<EarnOutcome> {
  const refusal = refusedPayoutAddress(deps, request.payoutAddress);
  if (refusal) return { type: "invalid_payout_address", detail: refusal };

  let terms: X402Terms;
  try {
    terms = await deps.terms();
  } catch (error) {
    deps.logger.warn({ err: error }, "x402 terms unavailable (facilitator unreachable?)");
    return {
      type: "facilitator_unavailable",
      detail: "The payment facilitator cannot be reached.",
    };
  }
  if (!request.paymentHeader) {
    return {
      type: "payment_required",
      paymentRequired: await terms.paymentRequired(PAYMENT_REQUIRED),
    };
  }
  const refused = async (reason: string): Promise<EarnOutcome> => ({
    type: "payment_refused",
    reason,
    paymentRequired: await terms.paymentRequired(reason),
  });

  const checked = checkPaymentHeader(request.paymentHeader, terms);
  if (!checked.ok) return refused(checked.reason);
  const payment = checked.payment;

  const known = await readX402Payment(deps.sql, payment.payer, payment.nonce);
  if (known) return answerAgain(deps, payment, known, refused);

  let verdict: VerifyResponse;
  try {
    await deps.facilitator.checkReady();
    verdict = await deps.facilitator.client.verify(payment.payload, payment.requirements);
  } catch (error) {
    if (error instanceof VerifyError) return refused(error.invalidReason ?? "invalid_payment");
    deps.logger.warn({ err: error }, "x402 verify could not be done");
    return {
      type: "facilitator_unavailable",
      detail: "The payment facilitator cannot be reached.",
    };
  }
  if (!verdict.isValid) return refused(verdict.invalidReason ?? "invalid_payment");

  let claimId: string;
  try {
    const created = await createClaim(
      deps,
      {
        flow: "x402",
        payoutAddress: request.payoutAddress,
        email: request.email,
        agentName: request.agentName,
      },
      {
        alsoInTransaction: (transaction, id) =>
          recordAuthorization(transaction, {
            payer: payment.payer,
            nonce: payment.nonce,
            claimId: id,
            digest: payment.digest,
          }),
      },
    );
    if (created.type === "invalid_payout_address") return created;
    if (created.type !== "created") throw new Error(`x402 claim not created: ${created.type}`);
    claimId = created.claimId;
  } catch (error) {
    // A concurrent twin of this payment recorded it first: answer as it does.
    if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
    const twin = await readX402Payment(deps.sql, payment.payer, payment.nonce);
    if (!twin) throw error;
    return answerAgain(deps, payment, twin, refused);
  }

  crashIfConfigured(deps.config, "after_x402_recorded");
  return settle(deps, payment, claimId, refused);
}

async function settle(
  deps: X402Deps,
  payment: CheckedPayment,
  claimId: string,
  refused: (reason: string) => Promise<EarnOutcome>,
): Promise<EarnOutcome> {
  let result: SettleResponse;
  try {
    result = await deps.facilitator.client.settle(payment.payload, payment.requirements);
  } catch (error) {
    if (error instanceof SettleError && !error.transaction) {
      await recordSettlementFailed(deps.sql, claimId, error.errorReason ?? "settlement_failed");
      return refused(error.errorReason ?? "settlement_failed");
    }
    // Gone mid-settle (timeout, network): it may or may not have settled. Not a failure, and
    // never a second charge: the claim stays on record and the matcher finishes it.
    deps.logger.warn({ err: error, claimId }, "x402 settlement outcome unknown");
    await recordSettlementUnknown(deps.sql, claimId, (error as SettleError).transaction || null);
    return { type: "settlement_unknown", claimId };
  }
  if (!result.success) {
    if (result.errorReason === "settlement_pending") {
      await recordSettlementUnknown(deps.sql, claimId, result.transaction || null);
      return { type: "settlement_unknown", claimId };
    }
    await recordSettlementFailed(deps.sql, claimId, result.errorReason ?? "settlement_failed");
    return refused(result.errorReason ?? "settlement_failed");
  }

  crashIfConfigured(deps.config, "after_x402_settled");
  const paymentResponse = encodePaymentResponseHeader(result);
  const transfer = await findSettlementTransfer(deps, result.transaction as Hex, payment).catch(
    (error: unknown) => {
      deps.logger.warn({ err: error, claimId }, "settlement transfer not readable yet");
      return null;
    },
  );
  await recordSettled(deps.sql, claimId, { txHash: result.transaction, paymentResponse }, transfer);
  await waitForClaim(deps.sql, claimId, deps.config.x402.payoutWaitMs);
  return { type: "paid", claimId, paymentResponse };
}

/** The same payment again: never settle twice; answer with what the first one got. */
async function answerAgain(
  deps: X402Deps,
  payment: CheckedPayment,
  known: X402Payment,
  refused: (reason: string) => Promise<EarnOutcome>,
): Promise<EarnOutcome> {
  if (known.digest !== payment.digest) return refused("invalid_exact_evm_nonce_already_used");
  let record: X402Payment | null = known;
  // A twin may be settling right now: wait for its outcome rather than race it, as long as a
  // settlement can take. A record still `settling` after that belongs to a process that died
  // mid-way: its outcome is unknown (the chain will tell the matcher), never settled again.
  const deadline = known.updatedAt.getTime() + deps.config.x402.settleTimeoutMs + 5_000;
  while (record?.status === "settling" && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    record = await readX402Payment(deps.sql, payment.payer, payment.nonce);
  }
  if (record?.status === "settling") {
    await recordSettlementUnknown(deps.sql, known.claimId, null);
    return { type: "settlement_unknown", claimId: known.claimId };
  }
  if (!record || record.status === "unknown") {
    return { type: "settlement_unknown", claimId: known.claimId };
  }
  if (record.status === "failed") return refused(record.failureReason ?? "settlement_failed");
  await waitForClaim(deps.sql, known.claimId, deps.config.x402.payoutWaitMs);
  return { type: "paid", claimId: known.claimId, paymentResponse: record.paymentResponse };
}
