import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import {
  bytesToHex,
  concatBytes,
  encodeFunctionData,
  type Hex,
  hexToBytes,
  keccak256,
  numberToHex,
  parseGwei,
  recoverMessageAddress,
  type TransactionSerializable,
  toHex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import {
  checkedSignature,
  KNOWN_ANSWERS,
  localAccount,
  signingBackend,
} from "../../api/signing/localAccount.ts";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { transferWithAuthorizationTypes } from "../support/eip3009.ts";

/**
 * The service signs with libsecp256k1 where its binding loads; every signature must be exactly
 * what viem's own account makes (RFC 6979 nonces, low S), or a payout would come from another
 * sender and a receipt would not verify.
 */

const randomKey = () => toHex(randomBytes(32));
/** secp256k1's group order n. */
const CURVE_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
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
    expect(signingBackend()).toEqual({ backend: "libsecp256k1" });
  });

  it("hold known answers viem gives, one of each recovery parity", async () => {
    const viem = privateKeyToAccount(KNOWN_ANSWERS.privateKey);
    const texts = ["pay-and-earn signing self-check", "pay-and-earn signing self-check 1"];
    for (const [index, { hash, signature }] of KNOWN_ANSWERS.signatures.entries()) {
      expect(keccak256(toHex(texts[index] as string))).toBe(hash);
      expect(await viem.sign({ hash })).toBe(signature);
    }
    expect(KNOWN_ANSWERS.signatures.map(({ signature }) => signature.slice(-2))).toEqual([
      "1b",
      "1c",
    ]);
  });

  it("never return a signature that does not recover to the key with a low S", () => {
    const binding = createRequire(import.meta.url)("secp256k1/bindings") as Parameters<
      typeof checkedSignature
    >[0];
    const key = randomBytes(32);
    const { publicKey } = privateKeyToAccount(toHex(key));
    const hash = keccak256(toHex(randomBytes(32)));
    expect(checkedSignature(binding, hash, key, publicKey)).not.toBeNull();

    const wrongParity = {
      ...binding,
      ecdsaSign: (message: Uint8Array, privateKey: Uint8Array) => {
        const signed = binding.ecdsaSign(message, privateKey);
        return { ...signed, recid: 1 - signed.recid };
      },
    };
    expect(checkedSignature(wrongParity, hash, key, publicKey)).toBeNull();

    // The same signature with S mirrored (and the parity flipped with it) still recovers to the
    // key, but is not canonical: nodes refuse it (EIP-2).
    const highS = {
      ...binding,
      ecdsaSign: (message: Uint8Array, privateKey: Uint8Array) => {
        const { signature, recid } = binding.ecdsaSign(message, privateKey);
        const s = BigInt(bytesToHex(signature.subarray(32)));
        const mirrored = hexToBytes(numberToHex(CURVE_ORDER - s, { size: 32 }));
        return { signature: concatBytes([signature.subarray(0, 32), mirrored]), recid: 1 - recid };
      },
    };
    const mirrored = highS.ecdsaSign(hexToBytes(hash), key);
    const recovered = binding.ecdsaRecover(
      mirrored.signature,
      mirrored.recid,
      hexToBytes(hash),
      false,
    );
    expect(bytesToHex(recovered)).toBe(publicKey);
    expect(checkedSignature(highS, hash, key, publicKey)).toBeNull();

    const otherKey = {
      ...binding,
      ecdsaSign: (message: Uint8Array) => binding.ecdsaSign(message, randomBytes(32)),
    };
    expect(checkedSignature(otherKey, hash, key, publicKey)).toBeNull();
  });

  it("leave a hash that is not 32 bytes to viem", async () => {
    const key = randomKey();
    const hash = "0x1234" as Hex;
    expect(await localAccount(key).sign({ hash })).toBe(
      await privateKeyToAccount(key).sign({ hash }),
    );
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
