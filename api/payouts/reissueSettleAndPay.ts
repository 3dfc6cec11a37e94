import type { Address, Hex, PublicClient } from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import type { Database, Transaction } from "../db/connect.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import {
  SETTLE_WITH_PAYOUT_MIN_SECONDS,
  signedAuthorizationOf,
} from "../x402/paymentAuthorization.ts";
import { failSettlement } from "../x402/x402Payments.ts";
import { abandonForReissue } from "./payoutRecords.ts";

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
  | { type: "not_final"; detail: string }
  | { type: "needs_a_person"; detail: string }
  | { type: "not_waiting_on_taken_nonce"; detail: string };

/** The x402 record's `failure_reason` when the re-issue fails the claim. */
export type SettlementFailure =
  | "authorization_used_without_payout"
  | "authorization_expired_unsettled";

interface AuthorizationOnChain {
  /** Used at the chain's head. */
  usedAtHead: boolean;
  /** Used at the final block (PAYOUT_CONFIRMATIONS deep): no reorg the service allows for undoes it. */
  usedAtFinal: boolean;
  validBefore: bigint;
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
 * - unused and valid for long enough: abandoned, and the sender signs a new settle-and-pay at a
 *   new nonce. Both carry the same authorization, which the token lets be used once: should a
 *   reorg ever mine the old bytes after all, at most one of the two moves any USDC;
 * - used (at the final block), or ran out unused: abandoned, the settlement `failed` and the
 *   claim `failed`, no payout. Should the use have been the verified authorization paying pay_to,
 *   the matcher pays the failed claim after all (failed → paid) and it gets a plain payout then.
 * A claim the settlement watcher failed already (its authorization ran out unused) only has its
 * payout abandoned. The claim row is locked while this decides, so the matcher or the watcher
 * changing it meanwhile waits, and what it finds is decided again by it.
 */
export async function reissueSettleAndPay(
  deps: { sql: Database; usdc: Address; confirmations: number },
  rpc: PublicClient,
  payout: { claimId: string; nonce: bigint },
): Promise<SettleAndPayReissue> {
  const { sql } = deps;
  const [record] = await sql<{ payer: string; nonce: string; payment_header: string | null }[]>`
    select payer, nonce, payment_header from app.x402_payments where claim_id = ${payout.claimId}`;
  const authorization = record?.payment_header
    ? signedAuthorizationOf(record.payment_header)
    : null;
  if (!record || !authorization) {
    return {
      type: "needs_a_person",
      detail: "its settle-and-pay has no readable x402 authorization on record",
    };
  }
  const onChain = await readAuthorization(deps, rpc, {
    payer: record.payer as Address,
    nonce: record.nonce as Hex,
    validBefore: authorization.validBefore,
  });

  return sql.begin(async (transaction): Promise<SettleAndPayReissue> => {
    const [claim] = await transaction<{ status: string; own_payment: boolean }[]>`
      select c.status, exists (
          select 1 from app.payments p
          where p.claim_id = c.id
            and not exists (
              select 1 from app.payout_attempts a
              where a.claim_id = c.id and a.tx_hash = p.tx_hash)) as own_payment
      from app.claims c where c.id = ${payout.claimId}
      for update of c`;
    const [x402] = await transaction<{ status: string }[]>`
      select status from app.x402_payments where claim_id = ${payout.claimId}`;
    if (!claim || !x402) throw new Error(`claim ${payout.claimId} vanished`);

    if ((claim.status === "paid" || claim.status === "paying") && claim.own_payment) {
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

    if (onChain.usedAtHead && !onChain.usedAtFinal) {
      return {
        type: "not_final",
        detail: `the payer's authorization was used less than ${deps.confirmations} blocks ago; a reorg could still undo that use`,
      };
    }
    if (!onChain.usedAtFinal && onChain.secondsLeft >= SETTLE_WITH_PAYOUT_MIN_SECONDS) {
      return (await abandon(transaction, payout.nonce))
        ? { type: "settling_again", nonce: payout.nonce, validBefore: onChain.validBefore }
        : changed();
    }
    const failure: { reason: SettlementFailure; detail: string } = onChain.usedAtFinal
      ? {
          reason: "authorization_used_without_payout",
          detail: "the payer's authorization was used by a transaction that is not our payout",
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
  authorization: { payer: Address; nonce: Hex; validBefore: bigint },
): Promise<AuthorizationOnChain> {
  const head = await rpc.getBlock({ blockTag: "latest" });
  const finalBlock = head.number - BigInt(deps.confirmations);
  const usedAt = (blockNumber: bigint) =>
    rpc.readContract({
      address: deps.usdc,
      abi: usdcAbi,
      functionName: "authorizationState",
      args: [authorization.payer, authorization.nonce],
      blockNumber,
    });
  const [usedAtHead, usedAtFinal] = await Promise.all([
    usedAt(head.number),
    finalBlock >= 0n ? usedAt(finalBlock) : Promise.resolve(false),
  ]);
  const wallClock = BigInt(Math.floor(Date.now() / 1000));
  const now = head.timestamp > wallClock ? head.timestamp : wallClock;
  return {
    usedAtHead,
    usedAtFinal,
    validBefore: authorization.validBefore,
    secondsLeft: authorization.validBefore - now,
  };
}
