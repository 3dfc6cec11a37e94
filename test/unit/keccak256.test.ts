import { randomBytes } from "node:crypto";
import { bytesToHex, hashMessage as viemHashMessage, keccak256 as viemKeccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { hashMessage, keccak256, keccak256OfText } from "../../api/signing/keccak256.ts";

/** The WebAssembly Keccak gives viem's answers, across the sponge's block edges (136 bytes). */
describe("keccak256 in WebAssembly", () => {
  const lengths = [0, 1, 31, 32, 33, 110, 135, 136, 137, 271, 272, 273, 1000, 20_000];

  it.each(lengths)("hashes %i bytes as viem does", (length) => {
    const data = bytesToHex(randomBytes(length));
    expect(keccak256(data)).toBe(viemKeccak256(data));
  });

  it("hashes a text's UTF-8 bytes as viem does", () => {
    for (const text of ["", "abc", "0xd8da6bf26964af9d7eed9e03e53415d37aa96045", "ünïcødé ✓"]) {
      expect(`0x${keccak256OfText(text)}`).toBe(viemKeccak256(new TextEncoder().encode(text)));
    }
  });

  it("hashes a message as EIP-191 says, as viem's hashMessage does", () => {
    const messages = [
      "pay-and-earn receipt\nclaim: clm_1",
      "",
      { raw: bytesToHex(randomBytes(64)) },
      { raw: randomBytes(10) },
    ];
    for (const message of messages) {
      expect(hashMessage(message)).toBe(viemHashMessage(message));
    }
  });

  it("refuses what is not whole bytes of 0x hex, as viem does, instead of hashing a part", () => {
    for (const data of ["0x1", "0xabc", "0xzz", "0x12 4"] as const) {
      expect(() => keccak256(data as `0x${string}`)).toThrow();
    }
  });
});
