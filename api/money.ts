/**
 * USDC amounts: bigint atomic units (6 decimals) from the edge inward, decimal strings only on
 * the wire. The trade itself is fixed by the spec: pay 10, receive 1.
 */

export const USDC_DECIMALS = 6;
export const ONE_USDC = 10n ** BigInt(USDC_DECIMALS);

export const PRICE_ATOMIC = 10n * ONE_USDC;
export const PAYOUT_ATOMIC = 1n * ONE_USDC;

/** `10123456n` → `"10.123456"`; whole amounts without decimals (`10000000n` → `"10"`). */
export function formatUsdc(atomic: bigint): string {
  const sign = atomic < 0n ? "-" : "";
  const magnitude = atomic < 0n ? -atomic : atomic;
  const whole = magnitude / ONE_USDC;
  const fraction = (magnitude % ONE_USDC)
    .toString()
    .padStart(USDC_DECIMALS, "0")
    .replace(/0+$/, "");
  return `${sign}${whole}${fraction ? `.${fraction}` : ""}`;
}

/** Always six decimal places: `10000000n` → `"10.000000"` (amount_due_usdc, SPEC.md). */
export function formatUsdcFixed(atomic: bigint): string {
  const whole = atomic / ONE_USDC;
  const fraction = (atomic % ONE_USDC).toString().padStart(USDC_DECIMALS, "0");
  return `${whole}.${fraction}`;
}

/** `"10.123456"` → `10123456n`: a decimal USDC amount (at most six places) in atomic units. */
export function parseUsdc(decimal: string): bigint {
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(decimal.trim());
  if (!match?.[1]) throw new RangeError(`${JSON.stringify(decimal)} is not a USDC amount`);
  return BigInt(match[1]) * ONE_USDC + BigInt((match[2] ?? "").padEnd(USDC_DECIMALS, "0"));
}
