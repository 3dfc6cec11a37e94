import { createRequire } from "node:module";
import {
  bytesToHex,
  type Hex,
  hashTypedData,
  hexToBytes,
  type SerializeTransactionFn,
  serializeSignature,
  serializeTransaction,
  type TransactionSerializable,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { hashMessage, keccak256 } from "./keccak256.ts";

/** What this file uses of the `secp256k1` package's native binding (bitcoin-core's libsecp256k1). */
interface NativeSecp256k1 {
  ecdsaSign(message: Uint8Array, privateKey: Uint8Array): { signature: Uint8Array; recid: number };
  ecdsaRecover(
    signature: Uint8Array,
    recid: number,
    message: Uint8Array,
    compressed: boolean,
  ): Uint8Array;
}

interface SignatureParts {
  r: Hex;
  s: Hex;
  v: bigint;
  yParity: number;
}

/** Half the curve's order: a signature with a larger S is not canonical (EIP-2). */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/** undefined: not loaded yet; null: viem signs (no binary, or it gave a wrong signature). */
let loaded: NativeSecp256k1 | null | undefined;
let fallbackReason: string | null = null;

/**
 * Which signs here: the native binding, or viem, and why viem (no binary for this platform, a
 * known answer not reproduced, or a signature that did not check out).
 */
export function signingBackend(): { backend: "libsecp256k1" | "viem"; reason?: string } {
  return loadNative()
    ? { backend: "libsecp256k1" }
    : { backend: "viem", ...(fallbackReason ? { reason: fallbackReason } : {}) };
}

/**
 * The service's own keys (payouts, receipts, x402 settlements) as viem accounts that sign with
 * libsecp256k1 through the `secp256k1` package's native binding, where it loads: ~50 µs a signature
 * on these machines against ~400 µs for viem's JavaScript curve, and a burst of 10,000 payouts
 * signs 20,000 times (BENCHMARKS.md#payouts). Both use RFC 6979 nonces and low S, so the
 * signatures are viem's own, byte for byte (test/unit/localAccount.test.ts). The binding is used
 * only if it reproduces two known viem signatures when loaded, and every signature it makes is
 * checked before it is used: it must recover to this key and have a low S (~70 µs more). One that
 * does not is never returned: viem signs instead, from then on. Anything unusual (a hash that is
 * not 32 bytes) goes to viem as well. The binding is loaded directly, never the package's index,
 * which falls back to `elliptic` in JavaScript.
 */
export function localAccount(
  privateKey: Hex,
  options: Parameters<typeof privateKeyToAccount>[1] = {},
): PrivateKeyAccount {
  const account = privateKeyToAccount(privateKey, options);
  if (!loadNative()) return account;
  const key = hexToBytes(privateKey);
  /** The native signature of `hash`, checked; null when viem must sign. */
  const signed = (hash: Hex): SignatureParts | null => {
    const native = loadNative();
    if (!native || !/^0x[0-9a-fA-F]{64}$/.test(hash)) return null;
    const parts = checkedSignature(native, hash, key, account.publicKey);
    if (!parts) {
      loaded = null;
      fallbackReason = "a libsecp256k1 signature did not recover to its key with a low S";
    }
    return parts;
  };
  return {
    ...account,
    sign: async ({ hash }) => {
      const parts = signed(hash);
      return parts ? serializeSignature(parts) : account.sign({ hash });
    },
    signMessage: async ({ message }) => {
      const parts = signed(hashMessage(message));
      return parts ? serializeSignature(parts) : account.signMessage({ message });
    },
    signTypedData: async (typedData) => {
      const parts = signed(hashTypedData(typedData));
      return parts ? serializeSignature(parts) : account.signTypedData(typedData);
    },
    // As viem's own: a blob transaction is signed without its sidecars, then serialized with them.
    signTransaction: async <transaction extends TransactionSerializable>(
      transaction: transaction,
      { serializer = serializeTransaction as SerializeTransactionFn<transaction> } = {},
    ) => {
      const signable =
        transaction.type === "eip4844" ? { ...transaction, sidecars: false } : transaction;
      const parts = signed(keccak256(await serializer(signable)));
      return parts
        ? serializer(transaction, parts)
        : account.signTransaction(transaction, { serializer });
    },
  } as PrivateKeyAccount;
}

/**
 * Known answers: what viem signs for this key and these hashes (test/unit/localAccount.test.ts
 * checks them against viem), one of each recovery parity.
 */
export const KNOWN_ANSWERS = {
  privateKey: `0x${"5a".repeat(32)}` as Hex,
  signatures: [
    {
      /** keccak256 of "pay-and-earn signing self-check". */
      hash: "0x8f40af3e9d15db65456cad29e5843e4b3ae4a4545f29113afa8422d10aa7250f" as Hex,
      signature:
        "0xab88603bf2a2cc9bfd3fd5edcdde3900e790b72225787d6f10fa8dc672b42e374cdb664485e067e5c6539816aea8e869ee5ef22c7e50e399d9c92196b1cd53af1b" as Hex,
    },
    {
      /** keccak256 of "pay-and-earn signing self-check 1". */
      hash: "0xf4fc8f49c58b3a50347042beee0b6c67b8db6bf4e3b3e6dd1c5de21445726dc9" as Hex,
      signature:
        "0x42b8c6de6d4e4ef04db4d5e3c0823e6f34a5ad675829850db441e397f31defe0669b7fd011076a0513f11c7da1ef0affccf531eac64133e6971aafc07043d6331c" as Hex,
    },
  ],
};

function loadNative(): NativeSecp256k1 | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  let binding: NativeSecp256k1;
  try {
    binding = createRequire(import.meta.url)("secp256k1/bindings") as NativeSecp256k1;
  } catch (error) {
    fallbackReason = `the libsecp256k1 binding did not load: ${(error as Error).message}`;
    return null;
  }
  const key = hexToBytes(KNOWN_ANSWERS.privateKey);
  const { publicKey } = privateKeyToAccount(KNOWN_ANSWERS.privateKey);
  const reproduced = KNOWN_ANSWERS.signatures.every(({ hash, signature }) => {
    const parts = checkedSignature(binding, hash, key, publicKey);
    return parts !== null && serializeSignature(parts) === signature;
  });
  if (!reproduced) {
    fallbackReason = "the libsecp256k1 binding did not reproduce viem's known signatures";
    return null;
  }
  loaded = binding;
  return loaded;
}

/**
 * `hash` signed by the binding, or null unless it recovers to `publicKey` (uncompressed, as
 * viem's account holds it) with a low S. Exported for its test, which gives it bindings that lie
 * (the real one cannot be made to).
 */
export function checkedSignature(
  binding: NativeSecp256k1,
  hash: Hex,
  key: Uint8Array,
  publicKey: Hex,
): SignatureParts | null {
  const message = hexToBytes(hash);
  const { signature, recid } = binding.ecdsaSign(message, key);
  const r = bytesToHex(signature.subarray(0, 32));
  const s = bytesToHex(signature.subarray(32, 64));
  if (BigInt(s) > HALF_ORDER || (recid !== 0 && recid !== 1)) return null;
  const recovered = binding.ecdsaRecover(signature, recid, message, false);
  if (bytesToHex(recovered) !== publicKey) return null;
  // Both v and yParity, as viem's own `sign` gives them: legacy transactions are serialized with v.
  return { r, s, v: BigInt(27 + recid), yParity: recid };
}
