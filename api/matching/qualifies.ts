/**
 * Which transfer may pay which claim (SPEC.md "Payment matching"), shared by the matcher and
 * by attaching a tx hash, so both apply the same rule.
 *
 * Variant A: exactly the claim's amount_due from any wallet, or at least the price from the
 * claim's payout address. Variant B: at least the price; the payer's wallet is tied to the
 * claim by the sender rule or by the tx hash the client names. A variant A claim that opened
 * without a unique amount (the space was full) is matched as in variant B.
 */

export type MatchingVariant = "A" | "B";

export type Disqualification = "below_price" | "not_amount_due_nor_from_payout_address";

export function disqualification(
  variant: MatchingVariant,
  price: bigint,
  claim: { amountDue: bigint; payoutAddress: string },
  transfer: { from: string; value: bigint },
): Disqualification | null {
  if (hasUniqueAmount(variant, price, claim.amountDue)) {
    if (transfer.value === claim.amountDue) return null;
    if (transfer.value < price) return "below_price";
    return transfer.from === claim.payoutAddress ? null : "not_amount_due_nor_from_payout_address";
  }
  return transfer.value < price ? "below_price" : null;
}

/**
 * Whether a claim is paid by its own unique amount: variant A claims that got one. Unique
 * amounts are always above the price, so a variant A claim due exactly the price opened
 * without one (the amount space was full) and is matched like a variant B claim.
 */
export function hasUniqueAmount(variant: MatchingVariant, price: bigint, amountDue: bigint) {
  return variant === "A" && amountDue !== price;
}
