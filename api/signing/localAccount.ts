import { createRequire } from "node:module";
import {
  bytesToHex,
  type Hex,
  hashMessage,
  hashTypedData,
  hexToBytes,
  keccak256,
  type SerializeTransactionFn,
  serializeSignature,
  serializeTransaction,
  type TransactionSerializable,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";

/** What this file uses of the `secp256k1` package's native binding (bitcoin-core's libsecp256k1). */
interface NativeSecp256k1 {
  ecdsaSign(message: Uint8Array, privateKey: Uint8Array): { signature: Uint8Array; recid: number };
}

let loaded: NativeSecp256k1 | null | undefined;

/** Which signs here: the native binding, or viem (no binary, or it failed its known answer). */
export function signingBackend(): "libsecp256k1" | "viem" {
  return loadNative() ? "libsecp256k1" : "viem";
}

/**
 * The service's own keys (payouts, receipts, x402 settlements) as viem accounts that sign with
 * libsecp256k1 through the `secp256k1` package's native binding, where it loads: ~50 µs a
 * signature on these machines against ~400 µs for viem's JavaScript curve, and a burst of 10,000
 * payouts signs 20,000 times (BENCHMARKS.md). Both use RFC 6979 nonces and low S, so every
 * signature is the same, byte for byte, as viem's own (test/unit/localAccount.test.ts): the
 * binding is used only if it agrees with viem on a known signature when loaded, and viem's
 * account is used where it does not load (another platform, no prebuilt binary). The binding
 * is loaded directly, never the package's index, which falls back to `elliptic` in JavaScript.
 */
export function localAccount(
  privateKey: Hex,
  options: Parameters<typeof privateKeyToAccount>[1] = {},
): PrivateKeyAccount {
  const account = privateKeyToAccount(privateKey, options);
  const native = loadNative();
  if (!native) return account;
  const key = hexToBytes(privateKey);
  const signHash = (hash: Hex): Hex => serializeSignature(nativeSignature(native, hash, key));
  return {
    ...account,
    sign: async ({ hash }) => signHash(hash),
    signMessage: async ({ message }) => signHash(hashMessage(message)),
    signTypedData: async (typedData) => signHash(hashTypedData(typedData)),
    // As viem's own: a blob transaction is signed without its sidecars, then serialized with them.
    signTransaction: async <transaction extends TransactionSerializable>(
      transaction: transaction,
      { serializer = serializeTransaction as SerializeTransactionFn<transaction> } = {},
    ) => {
      const signable =
        transaction.type === "eip4844" ? { ...transaction, sidecars: false } : transaction;
      const hash = keccak256(await serializer(signable));
      return serializer(transaction, nativeSignature(native, hash, key));
    },
  } as PrivateKeyAccount;
}

function loadNative(): NativeSecp256k1 | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  try {
    const binding = createRequire(import.meta.url)("secp256k1/bindings") as NativeSecp256k1;
    if (agreesWithViem(binding)) loaded = binding;
  } catch {
    // No binary for this platform: viem's JavaScript curve signs.
  }
  return loaded;
}

/**
 * A known answer: what viem signs for this key and hash (test/unit/localAccount.test.ts checks it
 * against viem). The binding is trusted only if it gives the same.
 */
export const SELF_CHECK = {
  privateKey: `0x${"5a".repeat(32)}` as Hex,
  /** keccak256 of "pay-and-earn signing self-check". */
  hash: "0x8f40af3e9d15db65456cad29e5843e4b3ae4a4545f29113afa8422d10aa7250f" as Hex,
  signature:
    "0xab88603bf2a2cc9bfd3fd5edcdde3900e790b72225787d6f10fa8dc672b42e374cdb664485e067e5c6539816aea8e869ee5ef22c7e50e399d9c92196b1cd53af1b" as Hex,
};

function agreesWithViem(binding: NativeSecp256k1): boolean {
  const key = hexToBytes(SELF_CHECK.privateKey);
  return (
    serializeSignature(nativeSignature(binding, SELF_CHECK.hash, key)) === SELF_CHECK.signature
  );
}

function nativeSignature(binding: NativeSecp256k1, hash: Hex, key: Uint8Array) {
  const { signature, recid } = binding.ecdsaSign(hexToBytes(hash), key);
  // Both v and yParity, as viem's own `sign` gives them: legacy transactions are serialized with v.
  return {
    r: bytesToHex(signature.subarray(0, 32)),
    s: bytesToHex(signature.subarray(32, 64)),
    v: BigInt(27 + recid),
    yParity: recid,
  };
}
