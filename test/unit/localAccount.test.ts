import { randomBytes } from "node:crypto";
import {
  encodeFunctionData,
  type Hex,
  keccak256,
  parseGwei,
  recoverMessageAddress,
  type TransactionSerializable,
  toHex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { localAccount, SELF_CHECK, signingBackend } from "../../api/signing/localAccount.ts";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { transferWithAuthorizationTypes } from "../support/eip3009.ts";

/**
 * The service signs with libsecp256k1 where its binding loads; every signature must be exactly
 * what viem's own account makes (RFC 6979 nonces, low S), or a payout would come from another
 * sender and a receipt would not verify.
 */

const randomKey = () => toHex(randomBytes(32));
const recipient = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

function transactions(nonce: number): TransactionSerializable[] {
  const data = encodeFunctionData({
    abi: usdcAbi,
    functionName: "transfer",
    args: [recipient, 1_000_000n + BigInt(nonce)],
  });
  return [
    {
      type: "eip1559",
      chainId: 8453,
      nonce,
      to: recipient,
      data,
      gas: 100_000n,
      value: 0n,
      maxFeePerGas: parseGwei("0.5"),
      maxPriorityFeePerGas: parseGwei("0.001"),
    },
    { type: "legacy", chainId: 8453, nonce, to: recipient, data, gas: 60_000n, gasPrice: 1n },
    { type: "eip2930", chainId: 84532, nonce, to: recipient, gas: 21_000n, gasPrice: 7n },
  ];
}

describe("the service's signing accounts", () => {
  it("sign with libsecp256k1 on this machine", () => {
    // The prebuilt binary ships for linux-x64: here the fast path must be the one in use.
    expect(signingBackend()).toBe("libsecp256k1");
  });

  it("hold the known answer viem gives", async () => {
    const viem = privateKeyToAccount(SELF_CHECK.privateKey);
    expect(await viem.sign({ hash: SELF_CHECK.hash })).toBe(SELF_CHECK.signature);
    expect(keccak256(toHex("pay-and-earn signing self-check"))).toBe(SELF_CHECK.hash);
  });

  it("sign hashes, messages and transactions byte for byte as viem does", async () => {
    for (let round = 0; round < 25; round++) {
      const key = randomKey();
      const ours = localAccount(key);
      const viem = privateKeyToAccount(key);
      expect(ours.address).toBe(viem.address);

      const hash = keccak256(toHex(randomBytes(40)));
      expect(await ours.sign({ hash })).toBe(await viem.sign({ hash }));

      const message = `pay-and-earn receipt ${round} ${toHex(randomBytes(8))}`;
      const signed = await ours.signMessage({ message });
      expect(signed).toBe(await viem.signMessage({ message }));
      expect(await recoverMessageAddress({ message, signature: signed })).toBe(viem.address);
      const raw = { raw: toHex(randomBytes(32)) as Hex };
      expect(await ours.signMessage({ message: raw })).toBe(
        await viem.signMessage({ message: raw }),
      );

      for (const transaction of transactions(round)) {
        expect(await ours.signTransaction(transaction)).toBe(
          await viem.signTransaction(transaction),
        );
      }
    }
  });

  it("sign typed data (an EIP-3009 authorization) as viem does", async () => {
    const key = randomKey();
    const typedData = {
      domain: {
        name: "USD Coin",
        version: "2",
        chainId: 8453,
        verifyingContract: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      },
      types: transferWithAuthorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: {
        from: privateKeyToAccount(key).address,
        to: recipient,
        value: 10_000_000n,
        validAfter: 0n,
        validBefore: 2_000_000_000n,
        nonce: toHex(randomBytes(32)),
      },
    } as const;
    expect(await localAccount(key).signTypedData(typedData)).toBe(
      await privateKeyToAccount(key).signTypedData(typedData),
    );
  });
});
