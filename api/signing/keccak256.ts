import { createKeccak } from "hash-wasm";
import {
  type Hex,
  type SignableMessage,
  toPrefixedMessage,
  keccak256 as viemKeccak256,
} from "viem";

/**
 * Keccak-256 compiled to WebAssembly, for the hashes a burst makes by the thousand: each payout
 * hashes its transaction twice (to sign it, and for its hash) and each receipt its message.
 * viem's (@noble/hashes, JavaScript) was 7% of the service's CPU in a 10,000-payout burst
 * (BENCHMARKS.md#http-routes); this one takes 1.5-2 µs for an address where noble takes 7-8 warm.
 * test/unit/keccak256.test.ts holds both to viem's answers. One hasher, reused: JavaScript runs
 * one call at a time and none of these awaits between init and digest. A wrong transaction hash
 * would go unnoticed (the signature check recovers from the same hash) and would hide a mined
 * payout, so the hasher must give two known answers at load, or viem's Keccak is used instead.
 */
const hasher = await createKeccak(256);

const WHOLE_BYTES_HEX = /^0x(?:[0-9a-fA-F]{2})*$/;

function wasmKeccak256(data: Hex): Hex {
  // Buffer.from(…, "hex") drops an odd last digit and stops at a non-hex one; viem throws.
  if (!WHOLE_BYTES_HEX.test(data)) throw new Error("keccak256: not whole bytes of 0x hex");
  hasher.init();
  hasher.update(Buffer.from(data.slice(2), "hex"));
  return `0x${hasher.digest("hex")}`;
}

const KNOWN_ANSWERS: [Hex, Hex][] = [
  ["0x", "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"],
  ["0x616263", "0x4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"],
];

/** keccak256 of bytes given as 0x hex (viem's `keccak256(hex)`). */
export const keccak256: (data: Hex) => Hex = KNOWN_ANSWERS.every(
  ([data, hash]) => wasmKeccak256(data) === hash,
)
  ? wasmKeccak256
  : (data) => viemKeccak256(data);

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
