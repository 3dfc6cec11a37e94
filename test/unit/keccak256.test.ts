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

  it("answers the same after an interleaving of calls (one hasher, reused)", () => {
    const first = bytesToHex(randomBytes(200));
    const expected = viemKeccak256(first);
    expect(keccak256(first)).toBe(expected);
    keccak256OfText("something else");
    expect(keccak256(first)).toBe(expected);
  });
});
