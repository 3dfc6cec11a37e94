import { createKeccak } from "hash-wasm";
import { type Hex, type SignableMessage, toPrefixedMessage } from "viem";

/**
 * Keccak-256 compiled to WebAssembly, for the hashes a burst makes by the thousand: each payout
 * hashes its transaction twice (to sign it, and for its hash) and each receipt its message.
 * viem's (@noble/hashes, JavaScript) was 7% of the service's CPU in a 10,000-payout burst
 * (BENCHMARKS.md); this one takes 1.5-2 µs for an address where noble takes 7-8 warm.
 * test/unit/keccak256.test.ts holds both to viem's answers. One hasher, reused: JavaScript runs
 * one call at a time and none of these awaits between init and digest.
 */
const hasher = await createKeccak(256);

/** keccak256 of bytes given as 0x hex (viem's `keccak256(hex)`). */
export function keccak256(data: Hex): Hex {
  hasher.init();
  hasher.update(Buffer.from(data.slice(2), "hex"));
  return `0x${hasher.digest("hex")}`;
}

/** keccak256 of a text's UTF-8 bytes, as hex digits without 0x (EIP-55 hashes the address so). */
export function keccak256OfText(text: string): string {
  hasher.init();
  hasher.update(text);
  return hasher.digest("hex");
}

/** EIP-191's hash of a message, as viem's `hashMessage`. */
export function hashMessage(message: SignableMessage): Hex {
  return keccak256(toPrefixedMessage(message));
}
