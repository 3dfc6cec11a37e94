import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { Address, Hex } from "viem";

/** An EIP-3009 authorization and its signature, as SettleAndPay passes them to the token. */
export interface SignedAuthorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  signature: Hex;
}

/** The payout sender starts no settle-and-pay this close to the end of its authorization. */
export const SETTLE_MARGIN_SECONDS = 10n;

/**
 * An authorization is recorded to settle with its payout only with this much time left: the
 * margin above and time for the sender's round (earnWithX402.ts, leavesTimeToSettleWithPayout).
 */
export const SETTLE_WITH_PAYOUT_MIN_SECONDS = SETTLE_MARGIN_SECONDS + 20n;

/**
 * Only a plain ECDSA signature (65 bytes) goes into the payout wallet's transaction. A smart
 * wallet's signature (ERC-1271, or ERC-6492 for one not deployed yet) can be of any length: a
 * payer's 4 KB signature pushed the transaction's calldata floor (EIP-7623) over its fixed gas
 * limit, and a transaction that can never be mined holds every later payout behind its nonce.
 * Such a payment keeps the two-transaction path, where the facilitator settles it on its own.
 */
const ECDSA_SIGNATURE = /^0x[0-9a-fA-F]{130}$/;

/**
 * The authorization inside a PAYMENT-SIGNATURE header already checked against our terms
 * (paymentPayload.ts), or null when it must not go into the payout wallet's transaction
 * (unreadable, or not a plain 65-byte signature).
 */
export function signedAuthorizationOf(paymentHeader: string): SignedAuthorization | null {
  let decoded: { payload?: { authorization?: Record<string, string>; signature?: string } };
  try {
    decoded = decodePaymentSignatureHeader(paymentHeader) as typeof decoded;
  } catch {
    return null;
  }
  const authorization = decoded.payload?.authorization;
  const signature = decoded.payload?.signature;
  if (!authorization || typeof signature !== "string") return null;
  if (!ECDSA_SIGNATURE.test(signature)) return null;
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  if (!from || !to || !value || !validAfter || !validBefore || !nonce) return null;
  return {
    from: from as Address,
    to: to as Address,
    value: BigInt(value),
    validAfter: BigInt(validAfter),
    validBefore: BigInt(validBefore),
    nonce: nonce as Hex,
    signature: signature as Hex,
  };
}
