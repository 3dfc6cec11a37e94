import type { IncomingTransfer } from "../chain/incomingTransfers.ts";
import { disqualification, type MatchingVariant } from "../claims/qualifies.ts";

export interface ClaimForMatching {
  id: string;
  status: string;
  payoutAddress: string;
  amountDue: bigint;
  txHash: string | null;
  /**
   * Unix seconds, rounded down. Block times have whole seconds: a transfer in a block stamped
   * with the second the claim expires in still pays it (the payer gets the benefit of doubt).
   */
  expiresAt: bigint;
}

export type MatchRule = "x402" | "tx_hash" | "amount" | "sender";
export type UnmatchedReason =
  | "below_price"
  | "claim_expired"
  | "claim_already_paid"
  | "no_matching_claim";

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
 * DESIGN.md §5, first hit wins: x402 authorization, named tx hash, exact amount (variant A),
 * sender. Decides a batch in order; a claim matched earlier in the batch is no longer open.
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
      if (!claim) return false;
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
      if (claim) {
        return taken.has(claim.id) || PAID_STATUSES.has(claim.status)
          ? unmatched(transfer, "claim_already_paid", claim.id)
          : match(claim, "x402");
      }
    }

    const named = context.byTxHash.get(transfer.txHash);
    if (openFor(named) && qualifies(named)) return match(named, "tx_hash");

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

    if (transfer.value < context.price) return unmatched(transfer, "below_price", null);
    return nearMiss
      ? unmatched(transfer, nearMiss.reason, nearMiss.claimId)
      : unmatched(transfer, "no_matching_claim", null);
  });
}

function unmatched(
  transfer: IncomingTransfer,
  reason: UnmatchedReason,
  claimId: string | null,
): Decision {
  return { kind: "unmatched", transfer, reason, claimId };
}
