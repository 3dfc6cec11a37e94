import type { Address, Hex, PublicClient } from "viem";
import type { Database, Transaction } from "../db/connect.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import {
  SETTLE_WITH_PAYOUT_MIN_SECONDS,
  signedAuthorizationOf,
} from "../x402/paymentAuthorization.ts";
import { authorizationUsed, useOfAuthorization } from "../x402/useOfAuthorization.ts";
import { failSettlement } from "../x402/x402Payments.ts";
import { abandonForReissue } from "./payoutRecords.ts";
import { whySettleAndPayCannotBeSent } from "./settleAndPayReadiness.ts";

/** What the re-issue of a settle-and-pay payout did, or why it did nothing. */
export type SettleAndPayReissue =
  /** The claim was paid on its own (its authorization used to pay_to): a plain payout follows. */
  | { type: "reissued"; nonce: bigint }
  /** The authorization is unused and valid: the sender signs a new settle-and-pay. */
  | { type: "settling_again"; nonce: bigint; validBefore: bigint }
  /** The authorization was used elsewhere or ran out unused: no payment, so no payout. */
  | { type: "claim_failed"; nonce: bigint; reason: SettlementFailure; detail: string }
  /** The claim was closed already (failed, expired): nothing is to be paid. */
  | { type: "abandoned"; nonce: bigint; claimStatus: string }
  /**
   * The authorization paid pay_to (not by our payout) and the matcher has not recorded that
   * payment yet: the claim is paid by it; the re-issue waits for the record.
   */
  | { type: "payment_not_recorded"; detail: string }
  | { type: "not_final"; detail: string }
  | { type: "needs_a_person"; detail: string }
  | { type: "not_waiting_on_taken_nonce"; detail: string };

/**
 * The x402 record's `failure_reason` when the re-issue fails the claim: the matcher's and the
 * settlement watcher's own, which a waiting request or a replay is refused with
 * (x402/refusalReasons.ts).
 */
export type SettlementFailure = "authorization_spent_elsewhere" | "authorization_expired_unsettled";

interface AuthorizationOnChain {
  /** Used at the chain's head. */
  usedAtHead: boolean;
  /** Used at the final block (PAYOUT_CONFIRMATIONS deep): no reorg the service allows for undoes it. */
  usedAtFinal: boolean;
  finalBlock: bigint;
  /** Seconds left before validBefore, by the later of the head's clock and this machine's. */
  secondsLeft: bigint;
}

/**
 * The re-issue of a settle-and-pay payout whose nonce a foreign transaction took, final, none of
 * its attempts mined (reissuePayout.ts checked that): its transaction settled nothing and paid
 * nothing (docs/operating.md#reissuing-a-payout). A plain payout would pay without a payment, so
 * what follows depends on the payer's authorization, read from the chain:
 * - the claim has a payment of its own (the authorization was used to pay pay_to by somebody
 *   else, and the matcher recorded it): the old payout is abandoned and the sender signs a plain
 *   payout, as for any claim;
 * - unused and valid for long enough, and SettleAndPay ready by this command's settings (its
 *   address set, its code verified, the wallet's allowance covering it: settleAndPayReadiness.ts;
 *   otherwise a person looks, nothing abandoned): abandoned, and the sender signs a new
 *   settle-and-pay at a new nonce. Both carry the same authorization, which the token lets be
 *   used once: should a reorg ever mine the old bytes after all, at most one of the two moves
 *   any USDC;
 * - used at the final block, classified as the settlement watcher does (useOfAuthorization.ts):
 *   the authorized transfer to pay_to is the claim's payment, not yet recorded by the matcher
 *   (its index lags): nothing is done until it is (`payment_not_recorded`); a use elsewhere (or
 *   a cancellation): abandoned, the settlement `failed` (authorization_spent_elsewhere, as the
 *   matcher says it) and the claim `failed`, no payout;
 * - ran out unused: the same, authorization_expired_unsettled;
 * - used at the head and not at the final block, or the other way round (a reorg, or an RPC
 *   answering from two chains), or a use the chain's answer cannot classify: `not_final`.
 * A claim the settlement watcher failed already (its authorization ran out unused) only has its
 * payout abandoned. The x402 record and then the claim are locked while this decides (the
 * watcher's order), so the matcher or the watcher changing them meanwhile waits, and what it
 * finds is decided again by it.
 */
export async function reissueSettleAndPay(
  deps: {
    sql: Database;
    usdc: Address;
    payTo: Address;
    wallet: Address;
    settleAndPay: { address: Address } | null;
    confirmations: number;
  },
  rpc: PublicClient,
  payout: { claimId: string; nonce: bigint },
): Promise<SettleAndPayReissue> {
  const { sql } = deps;
  const [record] = await sql<
    { payer: string; nonce: string; authorized_value: string; payment_header: string | null }[]
  >`
    select payer, nonce, authorized_value::text, payment_header from app.x402_payments
    where claim_id = ${payout.claimId}`;
  const signed = record?.payment_header ? signedAuthorizationOf(record.payment_header) : null;
  if (!record || !signed) {
    return {
      type: "needs_a_person",
      detail: "its settle-and-pay has no readable x402 authorization on record",
    };
  }
  // The sender signs the header's authorization; the chain is asked about the record's. Were
  // they ever two, what is read here would say nothing about what a new settle-and-pay does.
  if (
    signed.nonce.toLowerCase() !== record.nonce ||
    signed.from.toLowerCase() !== record.payer ||
    signed.value !== BigInt(record.authorized_value)
  ) {
    return {
      type: "needs_a_person",
      detail: `the authorization in its stored header (payer ${signed.from}, nonce ${signed.nonce}) is not the one its x402 record names (payer ${record.payer}, nonce ${record.nonce})`,
    };
  }
  const authorization = {
    payer: record.payer as Address,
    nonce: record.nonce as Hex,
    value: BigInt(record.authorized_value),
  };
  const onChain = await readAuthorization(deps, rpc, authorization, signed.validBefore);
  // Only what the decision below needs is asked of the chain.
  const use = onChain.usedAtFinal
    ? await useOfAuthorization(rpc, deps, authorization, onChain.finalBlock)
    : null;
  const unready =
    !onChain.usedAtHead && onChain.secondsLeft >= SETTLE_WITH_PAYOUT_MIN_SECONDS
      ? await whySettleAndPayCannotBeSent(deps, rpc)
      : null;

  return sql.begin(async (transaction): Promise<SettleAndPayReissue> => {
    // The settlement watcher's order (its record, then the claim): the other order could
    // deadlock with it.
    const [x402] = await transaction<{ status: string }[]>`
      select status from app.x402_payments where claim_id = ${payout.claimId} for update`;
    const [claim] = await transaction<{ status: string }[]>`
      select status from app.claims where id = ${payout.claimId} for update`;
    if (!claim || !x402) throw new Error(`claim ${payout.claimId} vanished`);
    // Read after the lock, in a statement of its own: a matcher that recorded the payment while
    // this waited for the lock committed it first, and this statement's snapshot has it.
    const [payment] = await transaction<{ own: boolean }[]>`
      select exists (
        select 1 from app.payments p
        where p.claim_id = ${payout.claimId}
          and not exists (
            select 1 from app.payout_attempts a
            where a.claim_id = p.claim_id and a.tx_hash = p.tx_hash)) as own`;

    if ((claim.status === "paid" || claim.status === "paying") && payment?.own) {
      return (await abandon(transaction, payout.nonce))
        ? { type: "reissued", nonce: payout.nonce }
        : changed();
    }
    if (claim.status === "failed" || claim.status === "expired") {
      return (await abandon(transaction, payout.nonce))
        ? { type: "abandoned", nonce: payout.nonce, claimStatus: claim.status }
        : changed();
    }
    if (
      claim.status !== "awaiting_payment" ||
      (x402.status !== "settling" && x402.status !== "unknown")
    ) {
      // Paying on the settle-and-pay's own payment (a reorg took it away before the nonce was
      // taken): nothing here can tell what the chain owes it.
      return {
        type: "needs_a_person",
        detail: `the claim is ${claim.status}, its x402 settlement ${x402.status}, and it has no payment of its own`,
      };
    }

    // Used at one block and not at the other: a use a reorg may still undo, or a node that
    // answers from two chains. Either way, nothing is decided on it yet.
    if (onChain.usedAtHead !== onChain.usedAtFinal) {
      return {
        type: "not_final",
        detail: onChain.usedAtHead
          ? `the payer's authorization was used less than ${deps.confirmations} blocks ago; a reorg could still undo that use`
          : `the chain shows the payer's authorization used ${deps.confirmations} blocks deep but unused at its head: a reorg, or an RPC answering from two chains`,
      };
    }
    if (use === "settlement") {
      // The authorization itself paid pay_to (somebody mined the copy the pool showed): the
      // claim is paid by it. The matcher records that payment once it reaches the index; then
      // this re-issues a plain payout.
      return {
        type: "payment_not_recorded",
        detail:
          "the payer's authorization paid pay_to in a transaction that is not our payout: that is the claim's payment, and the matcher records it once it has indexed it",
      };
    }
    if (use === "undecided") {
      return {
        type: "not_final",
        detail:
          "the payer's authorization is used, and the RPC's logs or old state did not tell by what",
      };
    }
    if (!onChain.usedAtFinal && onChain.secondsLeft >= SETTLE_WITH_PAYOUT_MIN_SECONDS) {
      if (unready) return { type: "needs_a_person", detail: unready };
      return (await abandon(transaction, payout.nonce))
        ? { type: "settling_again", nonce: payout.nonce, validBefore: signed.validBefore }
        : changed();
    }
    const failure: { reason: SettlementFailure; detail: string } = onChain.usedAtFinal
      ? {
          reason: "authorization_spent_elsewhere",
          detail:
            "the payer's authorization was used by a transfer that does not pay pay_to (or cancelled)",
        }
      : {
          reason: "authorization_expired_unsettled",
          detail: `the payer's authorization is unused and valid for ${onChain.secondsLeft > 0n ? onChain.secondsLeft : 0n} s more, too little to settle it with a new payout`,
        };
    if (!(await abandon(transaction, payout.nonce))) return changed();
    if (!(await failSettlement(transaction, payout.claimId, failure.reason))) {
      throw new Error(`claim ${payout.claimId} changed under its lock`);
    }
    return { type: "claim_failed", nonce: payout.nonce, ...failure };
  });
}

function changed(): SettleAndPayReissue {
  return { type: "not_waiting_on_taken_nonce", detail: "the payout changed meanwhile" };
}

async function abandon(transaction: Transaction, nonce: bigint): Promise<boolean> {
  const abandoned = await abandonForReissue(transaction, nonce);
  if (abandoned) await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
  return abandoned;
}

/** The authorization's state at the head and at the final block, and the time it has left. */
async function readAuthorization(
  deps: { usdc: Address; confirmations: number },
  rpc: PublicClient,
  authorization: { payer: Address; nonce: Hex },
  validBefore: bigint,
): Promise<AuthorizationOnChain> {
  const head = await rpc.getBlock({ blockTag: "latest" });
  const finalBlock = head.number - BigInt(deps.confirmations);
  const [usedAtHead, usedAtFinal] = await Promise.all([
    authorizationUsed(rpc, deps.usdc, authorization, head.number),
    finalBlock >= 0n
      ? authorizationUsed(rpc, deps.usdc, authorization, finalBlock)
      : Promise.resolve(false),
  ]);
  const wallClock = BigInt(Math.floor(Date.now() / 1000));
  const now = head.timestamp > wallClock ? head.timestamp : wallClock;
  return { usedAtHead, usedAtFinal, finalBlock, secondsLeft: validBefore - now };
}
