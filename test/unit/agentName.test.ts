import { describe, expect, it } from "vitest";
import { agentNameInput, createClaimRequest, x402EarnRequest } from "../../api/schemas/inputs.ts";
import { ledgerQuery } from "../../api/schemas/ledger.ts";
import { parseInput } from "../../api/schemas/parseInput.ts";

/**
 * `agent_name` is shown on the public ledger and read by agents: no invisible or unprintable
 * character gets in, and one name has one form (NFC) wherever it is stored or compared.
 */

const refused: [string, string][] = [
  ["a zero-width space (U+200B)", "ali\u200Bce"],
  ["a zero-width non-joiner (U+200C)", "ali\u200Cce"],
  ["a zero-width joiner (U+200D)", "ali\u200Dce"],
  ["a word joiner (U+2060)", "ali\u2060ce"],
  ["a byte order mark inside (U+FEFF)", "ali\uFEFFce"],
  ["a leading byte order mark (U+FEFF), which trim() would drop", "\uFEFFalice"],
  ["a trailing byte order mark (U+FEFF)", "alice\uFEFF"],
  ["a soft hyphen (U+00AD)", "ali\u00ADce"],
  ["an invisible function application (U+2061)", "ali\u2061ce"],
  ["a Mongolian vowel separator (U+180E)", "ali\u180Ece"],
  ["an interlinear annotation anchor (U+FFF9)", "ali\uFFF9ce"],
  ["tag characters (U+E0041, U+E007F)", "alice\u{E0041}\u{E0042}\u{E007F}"],
  ["a language tag (U+E0001)", "\u{E0001}alice"],
  ["a left-to-right mark (U+200E)", "alice\u200E"],
  ["a right-to-left override (U+202E)", "abc\u202Edef"],
  ["a first-strong isolate (U+2068)", "abc\u2068def"],
  ["a private-use character (U+E000)", "ali\uE000ce"],
  ["a private-use character (U+F8FF)", "alice\uF8FF"],
  ["a supplementary private-use character (U+F0000)", "alice\u{F0000}"],
  ["an unassigned code point (U+0378)", "ali\u0378ce"],
  ["a noncharacter (U+FFFF)", "alice\uFFFF"],
  ["the last code point (U+10FFFF)", "alice\u{10FFFF}"],
  ["a lone surrogate", "alice\uD800"],
  ["NUL", "evil\u0000name"],
  ["DEL", "evil\u007Fname"],
  ["a next-line control (U+0085)", "evil\u0085name"],
  ["a line separator (U+2028)", "two\u2028lines"],
  ["a paragraph separator (U+2029)", "two\u2029paragraphs"],
];

const accepted = ["my-agent", "agent 007", "エージェント", "Агент", "🤖 bot", "naïve café", "a"];

describe("agent_name", () => {
  it.each(refused)("refuses %s", (_, name) => {
    const result = agentNameInput.safeParse(name);
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.message)).toContain(
      "must not contain control, invisible (zero-width, format, tag), private-use or unassigned characters",
    );
  });

  it.each(accepted)("accepts %s", (name) => {
    expect(agentNameInput.parse(name)).toBe(name);
  });

  it("is normalised to NFC, so equivalent spellings are one name", () => {
    const composed = "caf\u00E9";
    const decomposed = "cafe\u0301";
    expect(decomposed).not.toBe(composed);
    expect(agentNameInput.parse(decomposed)).toBe(composed);
    expect(agentNameInput.parse(composed)).toBe(composed);
    // Angstrom sign → Å; Hangul jamo → one syllable.
    expect(agentNameInput.parse("\u212B-agent")).toBe("\u00C5-agent");
    expect(agentNameInput.parse("\u1100\u1161")).toBe("\uAC00");
  });

  it("is trimmed, then held to 1 to 64 characters", () => {
    expect(agentNameInput.parse("  spaced  ")).toBe("spaced");
    expect(agentNameInput.safeParse("   ").success).toBe(false);
    expect(agentNameInput.safeParse("a".repeat(65)).success).toBe(false);
    // 64 characters once composed, though 128 as typed.
    expect(agentNameInput.parse("e\u0301".repeat(64))).toBe("\u00E9".repeat(64));
  });

  it("is the same check wherever a client gives one: claims, x402, the ledger filter", () => {
    const payout = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    for (const name of ["ali\u200Bce", "alice\u{E0041}"]) {
      expect(parseInput(createClaimRequest, { payout_address: payout, agent_name: name }).ok).toBe(
        false,
      );
      expect(parseInput(x402EarnRequest, { payout_address: payout, agent_name: name }).ok).toBe(
        false,
      );
      expect(parseInput(ledgerQuery, { agent_name: name }).ok).toBe(false);
    }
    const created = parseInput(createClaimRequest, {
      payout_address: payout,
      agent_name: "cafe\u0301",
    });
    const filter = parseInput(ledgerQuery, { agent_name: "caf\u00E9" });
    expect(created.ok && filter.ok).toBe(true);
    if (created.ok && filter.ok) expect(created.value.agent_name).toBe(filter.value.agent_name);
  });
});
