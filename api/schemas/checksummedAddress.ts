import type { Address } from "viem";
import { keccak256OfText } from "../signing/keccak256.ts";

/** Addresses remembered; a full memory starts again empty (they are cheap to work out again). */
const MOST_REMEMBERED = 8192;
const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

const remembered = new Map<string, Address | null>();

/**
 * The EIP-55 (checksummed) form of `value` if it is a 0x address as viem's `isAddress(value, {
 * strict: true })` takes one (40 hex digits; mixed or upper case only with a valid checksum), else
 * null. Remembered per text: every claim answer and every request naming an address asks, and
 * viem's own caches cost ~7 µs a call on these machines where a Map costs 0.02
 * (BENCHMARKS.md#http-routes); test/unit/checksummedAddress.test.ts holds it to viem's verdicts.
 */
export function strictChecksummed(value: string): Address | null {
  let known = remembered.get(value);
  if (known !== undefined) return known;
  // Only the 42 characters of an address are remembered, never whatever else a client sends.
  if (!HEX_ADDRESS.test(value)) return null;
  const lowercase = value.toLowerCase();
  const checksummed = eip55(lowercase);
  known = value === lowercase || value === checksummed ? checksummed : null;
  if (remembered.size >= MOST_REMEMBERED - 1) remembered.clear();
  remembered.set(value, known);
  // A client's checksummed address is stored lowercase and checksummed again for every answer:
  // the stored form is remembered too (one Keccak instead of two).
  remembered.set(lowercase, checksummed);
  return known;
}

/** The checksummed form of an address already known good (stored lowercase, say). */
export function checksummed(address: string): Address {
  const known = strictChecksummed(address.toLowerCase());
  if (!known) throw new Error(`not an address: ${address}`);
  return known;
}

/** EIP-55: a hex letter is upper case where the same nibble of the lowercase text's hash is 8+. */
function eip55(lowercase: string): Address {
  const digits = lowercase.slice(2);
  // Keccak in WebAssembly (signing/keccak256.ts): every new payout address a claim names costs one.
  const hash = keccak256OfText(digits);
  let out = "0x";
  for (let index = 0; index < 40; index++) {
    const digit = digits[index] as string;
    out += digit > "9" && (hash[index] as string) >= "8" ? digit.toUpperCase() : digit;
  }
  return out as Address;
}
