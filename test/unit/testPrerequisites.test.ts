import { describe, expect, it } from "vitest";
import { chromiumExecutable } from "../support/browser.ts";
import { dovecotBinary, ensureDovecot, missingDovecotMessage } from "../support/dovecot.ts";

/**
 * What a newcomer sees when the browser or the IMAP server the tests need is missing: an exact
 * cause and the command that fixes it, never a time-out. The binaries are installed here, so
 * "missing" is made by pointing the lookups' overrides at nothing.
 */
describe("test prerequisites", () => {
  it("names CHROMIUM_PATH when it points at nothing", async () => {
    await expect(chromiumExecutable({ CHROMIUM_PATH: "/nonexistent/chromium" })).rejects.toThrow(
      "Chromium is missing at /nonexistent/chromium (CHROMIUM_PATH)",
    );
  });

  it("names DOVECOT_PATH and never installs over an override that points at nothing", async () => {
    const env = { DOVECOT_PATH: "/nonexistent/dovecot", PATH: "/usr/sbin:/usr/bin" };
    expect(dovecotBinary(env)).toBeUndefined();
    const commands: string[] = [];
    const outcome = await ensureDovecot(env, async (command, args) => {
      commands.push([command, ...args].join(" "));
      return 0;
    });
    expect(outcome).toBe("missing");
    expect(commands).toEqual([]);
    expect(missingDovecotMessage(env)).toContain("Dovecot is missing at /nonexistent/dovecot");
  });

  it("without an override, tells the apt command that installs Dovecot", () => {
    expect(missingDovecotMessage({})).toContain("apt-get install -y dovecot-imapd");
  });
});
