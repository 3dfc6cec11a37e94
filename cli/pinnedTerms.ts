import { formatUsdc, formatUsdcFixed, ONE_USDC, PRICE_ATOMIC, parseUsdc } from "../api/money.ts";
import { BASE_USDC_ADDRESS } from "../contracts-abi/usdc.ts";
import type { Offer } from "./earn/earnContext.ts";
import { CliError } from "./errors.ts";

/**
 * What this CLI pays, fixed here and not taken from the service: a wrong or hostile `--service`
 * must not get any other amount, token or chain signed. 10 USDC (SPEC.md: the price), Base's
 * USDC on chain 8453 (the devnet places the same contract at the same address on the same chain
 * id), and a claim's amount of 10 USDC plus a unique fraction below one USDC (variant A; variant
 * B asks for exactly 10).
 */
export const PINNED = {
  chainId: 8453,
  network: "eip155:8453",
  usdcContract: BASE_USDC_ADDRESS,
  priceAtomic: PRICE_ATOMIC,
  /** The x402 client's spend cap per payment: the price, never more. */
  spendCap: `$${formatUsdc(PRICE_ATOMIC)}`,
  /** The most a claim may ask for: the price and a fraction below one USDC. */
  claimCeilingAtomic: PRICE_ATOMIC + ONE_USDC - 1n,
} as const;

function same(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** The offer must name the pinned price, token and chain, or nothing is created or signed. */
export function checkPinnedOffer(offer: Offer): void {
  const wrong: string[] = [];
  if (offer.chain_id !== PINNED.chainId || offer.x402.network !== PINNED.network) {
    wrong.push(`chain ${offer.chain_id} (${offer.x402.network}), not Base (${PINNED.network})`);
  }
  if (!same(offer.usdc_contract, PINNED.usdcContract)) {
    wrong.push(`token ${offer.usdc_contract}, not Base's USDC ${PINNED.usdcContract}`);
  }
  if (
    parseUsdc(offer.price_usdc) !== PINNED.priceAtomic ||
    offer.x402.amount_atomic !== String(PINNED.priceAtomic)
  ) {
    wrong.push(
      `price ${offer.price_usdc} USDC (x402 ${offer.x402.amount_atomic} atomic), not ${formatUsdc(PINNED.priceAtomic)} USDC`,
    );
  }
  if (wrong.length > 0) {
    throw new CliError(
      "offer_refused",
      `offer_refused: the service asks for ${wrong.join("; ")}; this CLI pays only ${formatUsdc(PINNED.priceAtomic)} USDC of Base's USDC on chain ${PINNED.chainId}; nothing was created or signed`,
    );
  }
}

/** A claim's amount due: the price, plus at most a fraction below one USDC. */
export function checkPinnedClaimAmount(claimId: string, amountAtomic: bigint): void {
  if (amountAtomic < PINNED.priceAtomic || amountAtomic > PINNED.claimCeilingAtomic) {
    throw new CliError(
      "claim_amount_refused",
      `claim_amount_refused: claim ${claimId} asks for ${formatUsdcFixed(amountAtomic)} USDC; this CLI sends only ${formatUsdc(PINNED.priceAtomic)} to ${formatUsdc(PINNED.claimCeilingAtomic)} USDC; nothing was sent`,
    );
  }
}
