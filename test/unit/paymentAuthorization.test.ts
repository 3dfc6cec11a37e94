import { encodePaymentSignatureHeader } from "@x402/core/http";
import { describe, expect, it } from "vitest";
import { signedAuthorizationOf } from "../../api/x402/paymentAuthorization.ts";

/** A PAYMENT-SIGNATURE header carrying `signature` over an otherwise ordinary authorization. */
function headerWith(signature: string): string {
  return encodePaymentSignatureHeader({
    x402Version: 2,
    accepted: {} as never,
    payload: {
      authorization: {
        from: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        to: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
        value: "10000000",
        validAfter: "0",
        validBefore: "1900000000",
        nonce: `0x${"11".repeat(32)}`,
      },
      signature,
    },
  } as never);
}

describe("which x402 payments go into the payout wallet's own transaction", () => {
  it("takes a plain 65-byte ECDSA signature", () => {
    const signature = `0x${"ab".repeat(65)}`;
    expect(signedAuthorizationOf(headerWith(signature))).toMatchObject({
      value: 10_000_000n,
      signature,
    });
  });

  it("leaves any other signature to the two-transaction path: a smart wallet's may be kilobytes", () => {
    // A 4.4 KB ERC-1271 signature pushed the transaction's calldata floor over its gas limit: a
    // payout nonce that could never be mined (docs/payments.md#one-transaction-settlement).
    expect(signedAuthorizationOf(headerWith(`0x${"ab".repeat(4400)}`))).toBeNull();
    expect(signedAuthorizationOf(headerWith(`0x${"ab".repeat(64)}`))).toBeNull();
    expect(signedAuthorizationOf(headerWith(`0x${"ab".repeat(66)}`))).toBeNull();
    // ERC-6492: a signature wrapped for a wallet not deployed yet.
    expect(
      signedAuthorizationOf(headerWith(`0x${"ab".repeat(96)}${"6492".repeat(16)}`)),
    ).toBeNull();
  });
});
