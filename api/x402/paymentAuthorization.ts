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

/**
 * ERC-6492 wraps the signature of a smart wallet not deployed yet (the facilitator deploys it
 * before settling). The token cannot check it, so such a payment keeps the two-transaction path.
 */
const ERC6492_MAGIC = "6492649264926492649264926492649264926492649264926492649264926492";

/**
 * The authorization inside a PAYMENT-SIGNATURE header already checked against our terms
 * (paymentPayload.ts), or null when the token could not be given it as it is (unreadable, or an
 * ERC-6492 signature).
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
  if (signature.toLowerCase().endsWith(ERC6492_MAGIC)) return null;
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
