import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { checkReceiptSignature } from "../../api/receipts/checkReceiptSignature.ts";
import { receiptMessage } from "../../api/receipts/receiptMessage.ts";

/** What a receipt proves by itself (the CLI's offline check, and the first half of the service's). */

const key = privateKeyToAccount(generatePrivateKey());
const message = receiptMessage({
  service: "pay-and-earn",
  site: "http://localhost",
  holder: privateKeyToAccount(generatePrivateKey()).address,
  claimId: "clm_AAAAAAAAAAAAAAAAAAAAAA",
  paymentTx: `0x${"1".repeat(64)}`,
  payoutTx: `0x${"2".repeat(64)}`,
  chainId: 8453,
  issuedAt: new Date("2026-11-24T12:00:00Z"),
});

describe("checkReceiptSignature", () => {
  it("passes a receipt signed by the receipt key, with its facts", async () => {
    const check = await checkReceiptSignature(
      { message, signature: await key.signMessage({ message }) },
      key.address.toLowerCase(),
    );
    expect(check).toMatchObject({
      problem: null,
      signer: key.address,
      expectedSigner: key.address,
    });
    expect(check.facts?.Claim).toBe("clm_AAAAAAAAAAAAAAAAAAAAAA");
  });

  it("names the signer of a message that was changed after signing", async () => {
    const signature = await key.signMessage({ message });
    const check = await checkReceiptSignature(
      { message: message.replace("earned 1 USDC", "earned 100 USDC"), signature },
      key.address,
    );
    expect(check.problem).toBe("signed_by_another_key");
    expect(check.signer).not.toBe(key.address);
  });

  it("says bad_signature for bytes that are no signature", async () => {
    const check = await checkReceiptSignature(
      { message, signature: `0x${"00".repeat(65)}` },
      key.address,
    );
    expect(check).toMatchObject({ problem: "bad_signature", signer: null });
  });

  it("says not_a_receipt for anything else the key signed", async () => {
    const other = "hello";
    const check = await checkReceiptSignature(
      { message: other, signature: await key.signMessage({ message: other }) },
      key.address,
    );
    expect(check).toMatchObject({ problem: "not_a_receipt", signer: key.address, facts: null });
  });
});
