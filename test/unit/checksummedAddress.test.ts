import fc from "fast-check";
import { getAddress, isAddress } from "viem";
import { expect, it } from "vitest";
import { checksummed, strictChecksummed } from "../../api/schemas/checksummedAddress.ts";

const hexDigits = fc.constantFrom(..."0123456789abcdefABCDEF".split(""));
const anyCaseAddress = fc
  .array(hexDigits, { minLength: 40, maxLength: 40 })
  .map((digits) => `0x${digits.join("")}`);

it("agrees with viem's strict isAddress and getAddress on any text, remembered or not", () => {
  const checked = (value: string) => {
    const expected = isAddress(value, { strict: true }) ? getAddress(value) : null;
    expect(strictChecksummed(value), value).toBe(expected);
    // Asked again: the remembered answer is the same.
    expect(strictChecksummed(value), value).toBe(expected);
    // Its lowercase form, remembered with it when it is an address in any case.
    const lowercase = value.toLowerCase();
    const expectedLowercase = isAddress(lowercase, { strict: true }) ? getAddress(lowercase) : null;
    expect(strictChecksummed(lowercase), lowercase).toBe(expectedLowercase);
  };
  fc.assert(
    fc.property(
      fc.oneof(
        anyCaseAddress,
        anyCaseAddress.map((value) => value.toLowerCase()),
        anyCaseAddress.map((value) => getAddress(value.toLowerCase())),
        anyCaseAddress.map((value) => `0x${value.slice(2).toUpperCase()}`),
        anyCaseAddress.map((value) => ` ${value}`),
        anyCaseAddress.map((value) => value.slice(0, 41)),
        anyCaseAddress.map((value) => `0X${value.slice(2)}`),
        fc.string(),
      ),
      (value) => checked(value),
    ),
    { numRuns: 3000 },
  );
  for (const value of [
    "",
    "0x",
    `0x${"0".repeat(40)}`,
    "0x000000000000000000000000000000000000dEaD",
  ]) {
    checked(value);
  }
});

it("checksums a stored lowercase address and refuses what is not one", () => {
  const address = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
  expect(checksummed(address)).toBe(getAddress(address));
  expect(checksummed(getAddress(address))).toBe(getAddress(address));
  expect(() => checksummed("0x1234")).toThrow();
});
