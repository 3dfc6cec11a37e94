import type { IncomingTransfer } from "../chain/incomingTransfers.ts";
import type { UnmatchedReason } from "../reasons/reasonCatalog.ts";
import { disqualification, type MatchingVariant } from "./qualifies.ts";

export interface ClaimForMatching {
  id: string;
  flow: "claim" | "x402" | "mail";
  status: string;
  /** A failed x402 claim is still payable by its own authorization (its settlement was wrongly called failed). */
  failureReason: string | null;
  payoutAddress: string;
  amountDue: bigint;
  txHash: string | null;
  /** The tx hash was attached with its sender's signature over the claim id. */
  txHashSigned: boolean;
  /** x402 claims: the value of the EIP-3009 authorization the service verified; else null. */
  authorizedValue: bigint | null;
  /**
   * Unix seconds, rounded down. Block times have whole seconds: a transfer in a block stamped
   * with the second the claim expires in still pays it (the payer gets the benefit of doubt).
   */
  expiresAt: bigint;
}

export type MatchRule = "x402" | "tx_hash" | "amount" | "sender";
export type { UnmatchedReason };

export type Decision =
  | { kind: "match"; transfer: IncomingTransfer; claimId: string; rule: MatchRule }
  | {
      kind: "unmatched";
      transfer: IncomingTransfer;
      reason: UnmatchedReason;
      claimId: string | null;
    };

export interface MatchingContext {
  variant: MatchingVariant;
  price: bigint;
  /** x402 claims by "payer:nonce" of their EIP-3009 authorization. */
  byAuthorization: Map<string, ClaimForMatching>;
  byTxHash: Map<string, ClaimForMatching>;
  /** Variant A: the claim holding each reserved amount. */
  byAmount: Map<bigint, ClaimForMatching>;
  /** Claims awaiting payment (or expired), by payout address, oldest first. */
  bySender: Map<string, ClaimForMatching[]>;
}

const PAID_STATUSES = new Set(["paid", "paying", "completed", "failed"]);

/**
 * DESIGN.md §5, first hit wins, in order of how hard the link is to forge:
 * 1. the x402 authorization (an x402 claim is paid by nothing else, and its authorization pays
 *    nothing else);
 * 2. a tx hash named with its sender's signature over the claim id;
 * 3. the exact amount (variant A);
 * 4. the sender: the oldest open claim of the sender's own payout address (the payout goes back
 *    to the sender, so nobody gains by it but the sender);
 * 5. a tx hash named without a signature: anyone can name any hash, so it comes last.
 * Decides a batch in order; a claim matched earlier in the batch is no longer open.
 * Pure: reads nothing, writes nothing.
 */
export function decideMatches(transfers: IncomingTransfer[], context: MatchingContext): Decision[] {
  const taken = new Set<string>();
  return transfers.map((transfer) => {
    let nearMiss: { reason: UnmatchedReason; claimId: string } | undefined;
    // `notePaid`: a claim named by this transfer's hash or amount that is already paid is
    // worth reporting; a sender's other, already paid claims are not (they were never this
    // transfer's to pay, and a later batch would not even load them).
    const openFor = (
      claim: ClaimForMatching | undefined,
      notePaid = true,
    ): claim is ClaimForMatching => {
      if (!claim || claim.flow === "x402") return false;
      if (taken.has(claim.id) || PAID_STATUSES.has(claim.status)) {
        if (notePaid) nearMiss ??= { reason: "claim_already_paid", claimId: claim.id };
        return false;
      }
      if (transfer.blockTimestamp > claim.expiresAt) {
        nearMiss ??= { reason: "claim_expired", claimId: claim.id };
        return false;
      }
      return true;
    };
    const qualifies = (claim: ClaimForMatching) =>
      disqualification(context.variant, context.price, claim, transfer) === null;
    const match = (claim: ClaimForMatching, rule: MatchRule): Decision => {
      taken.add(claim.id);
      return { kind: "match", transfer, claimId: claim.id, rule };
    };

    if (transfer.authorizationNonce) {
      const claim = context.byAuthorization.get(`${transfer.from}:${transfer.authorizationNonce}`);
      // An x402 payment belongs to its claim and to no other, whatever else it would match.
      // The payer chose the nonce and can spend it on another authorization of its own (a
      // trifle sent ahead of the settlement): only the authorization the service verified pays.
      if (claim) {
        if (!isVerifiedAuthorization(claim, transfer, context.price)) {
          return unmatched(transfer, "not_the_verified_authorization", claim.id);
        }
        return taken.has(claim.id) || !x402Payable(claim)
          ? unmatched(transfer, "claim_already_paid", claim.id)
          : match(claim, "x402");
      }
    }

    const named = context.byTxHash.get(transfer.txHash);
    if (named?.txHashSigned && openFor(named) && qualifies(named)) return match(named, "tx_hash");

    if (context.variant === "A") {
      const reserved = context.byAmount.get(transfer.value);
      if (openFor(reserved) && reserved.amountDue === transfer.value)
        return match(reserved, "amount");
    }

    if (transfer.value >= context.price) {
      const candidates = context.bySender.get(transfer.from) ?? [];
      const oldest = candidates.find((claim) => openFor(claim, false));
      if (oldest) return match(oldest, "sender");
    }

    if (named && !named.txHashSigned && openFor(named) && qualifies(named)) {
      return match(named, "tx_hash");
    }

    if (transfer.value < context.price) return unmatched(transfer, "below_price", null);
    return nearMiss
      ? unmatched(transfer, nearMiss.reason, nearMiss.claimId)
      : unmatched(transfer, "no_matching_claim", null);
  });
}

/**
 * The transfer is the authorization the service verified for this claim: the same payer and
 * nonce (how it was found), to pay_to (every indexed incoming transfer is), and the verified
 * value, which is at least the price (DESIGN.md §12).
 */
function isVerifiedAuthorization(
  claim: ClaimForMatching,
  transfer: IncomingTransfer,
  price: bigint,
): boolean {
  return (
    claim.authorizedValue !== null &&
    transfer.value === claim.authorizedValue &&
    transfer.value >= price
  );
}

/**
 * An x402 claim its authorization may pay: awaiting payment (or expired), or failed because
 * its settlement was called failed when the chain now shows it happened.
 */
function x402Payable(claim: ClaimForMatching): boolean {
  if (claim.status === "failed") return claim.failureReason === "x402_settlement_failed";
  return !PAID_STATUSES.has(claim.status);
}

function unmatched(
  transfer: IncomingTransfer,
  reason: UnmatchedReason,
  claimId: string | null,
): Decision {
  return { kind: "unmatched", transfer, reason, claimId };
}
