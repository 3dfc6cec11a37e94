import { type DNSResolver, dkimVerify } from "mailauth";
import { describe, expect, it } from "vitest";
import { authenticateSender, relaxedAligned } from "../../api/mail/authenticateSender.ts";
import { headerBlock, headerTrick, keepFirstSignatures } from "../../api/mail/rawHeaders.ts";
import { readInbound } from "../../api/mail/readInbound.ts";
import { organizationalDomain } from "../../api/mailRequests/organizationalDomain.ts";

/**
 * The sender check's own rules, with mailauth and DNS data the test publishes (no server): the
 * address answered must be the one DMARC checked, alignment goes by the Public Suffix List, and
 * the work on one message is bounded.
 */

const zone: Record<string, Record<string, string[][]>> = {
  "attacker.test": { TXT: [["v=spf1 ip4:192.0.2.7 -all"]] },
  "_dmarc.attacker.test": { TXT: [["v=DMARC1; p=reject"]] },
};
const resolver: DNSResolver = async (name, type) => {
  const records = zone[name.toLowerCase().replace(/\.$/, "")]?.[type];
  if (records) return records;
  throw Object.assign(new Error(`query${type} ENOTFOUND ${name}`), { code: "ENOTFOUND" });
};
const limits = { maxSignatures: 5, deadlineMs: 2_000, lookupTimeoutMs: 1_000 };
const context = {
  ip: "192.0.2.7",
  helo: "mx.attacker.test",
  envelopeFrom: "x@attacker.test",
  trustReceived: false,
  mta: "mx.pay-and-earn.test",
  resolver,
  limits,
};
const message = (from: string) =>
  Buffer.from(`From: ${from}\r\nTo: earn@pay-and-earn.test\r\nSubject: hi\r\n\r\nbody\r\n`);

describe("the address answered is the address authenticated", () => {
  it("passes the attacker's own From", async () => {
    const verdict = await authenticateSender(
      message("x@attacker.test"),
      "x@attacker.test",
      context,
    );
    expect(verdict).toEqual({ pass: true, how: "dmarc=pass" });
  });

  it("refuses when the address to answer is not the From mailauth read", async () => {
    const verdict = await authenticateSender(
      message("x@attacker.test"),
      "victim@bank.test",
      context,
    );
    expect(verdict).toMatchObject({ pass: false, reason: "sender_mismatch", temporary: false });
  });

  it("refuses a From of a subdomain of the checked one too (DMARC checked the exact domain)", async () => {
    const verdict = await authenticateSender(
      message("x@attacker.test"),
      "x@mail.attacker.test",
      context,
    );
    expect(verdict).toMatchObject({ pass: false, reason: "sender_mismatch" });
  });
});

describe("alignment by the Public Suffix List", () => {
  it("finds the organizational domain", () => {
    expect(organizationalDomain("mail.example.co.uk")).toBe("example.co.uk");
    expect(organizationalDomain("eve.github.io")).toBe("eve.github.io");
    expect(organizationalDomain("co.uk")).toBeNull();
  });

  it("aligns subdomains of one organization, never across a public suffix", () => {
    expect(relaxedAligned("bounces.example.co.uk", "example.co.uk")).toBe(true);
    expect(relaxedAligned("example.co.uk", "mail.example.co.uk")).toBe(true);
    // A name-suffix rule would align each of these.
    expect(relaxedAligned("co.uk", "example.co.uk")).toBe(false);
    expect(relaxedAligned("eve.github.io", "alice.eve.github.io")).toBe(true);
    expect(relaxedAligned("github.io", "alice.github.io")).toBe(false);
    expect(relaxedAligned(undefined, "example.com")).toBe(false);
  });
});

describe("header blocks read differently by mail programs", () => {
  it("finds control characters, bare CRs and several From-like fields", () => {
    const trick = (text: string) => headerTrick(Buffer.from(text, "latin1"));
    expect(trick("From: a@b.test\r\nSubject: hi\r\n\tfolded")).toBeNull();
    expect(trick("From: a@b.test\r\n\x0bFrom: x@c.test")).toMatch(/0x0b/);
    expect(trick("From: a@b.test\r\nSubject: a\x00b")).toMatch(/0x00/);
    expect(trick("From: a@b.test\rSubject: hi")).toMatch(/bare CR/);
    expect(trick("From: a@b.test\r\nFROM : x@c.test")).toBe("2 From fields");
    // Folded into the first by both parsers, but a parser that trims lines reads two: refused.
    expect(trick("From: a@b.test\r\n From: x@c.test")).toBe("2 From fields");
  });
});

describe("bounded DKIM work", () => {
  it("keeps the topmost signatures and the message's bytes otherwise", () => {
    // Folded signature fields, as signers write them; the newest on top.
    const fields = Array.from(
      { length: 8 },
      (_, index) =>
        `DKIM-Signature: v=1; a=rsa-sha256; d=attacker.test; s=s${7 - index};\r\n\th=from; bh=AA==; b=AA==\r\n`,
    );
    const raw = Buffer.concat([Buffer.from(fields.join("")), message("x@attacker.test")]);
    const bounded = keepFirstSignatures(raw, 3);
    expect(bounded.dropped).toBe(5);
    const kept = headerBlock(bounded.raw).bytes.toString();
    expect(kept.match(/^DKIM-Signature:/gim)).toHaveLength(3);
    expect(kept).toContain("s=s7;");
    expect(kept).not.toContain("s=s4;");
    expect(bounded.raw.toString().endsWith("\r\n\r\nbody\r\n")).toBe(true);
    expect(bounded.raw.toString()).toContain("From: x@attacker.test\r\nTo:");
    expect(keepFirstSignatures(raw, 8)).toEqual({ raw, dropped: 0 });
    // Signatures last in the header block: the blank line that ends it stays one blank line.
    const last = Buffer.from(`From: x@attacker.test\r\n${fields.join("")}\r\nbody\r\n`);
    expect(keepFirstSignatures(last, 1).raw.toString()).toBe(
      `From: x@attacker.test\r\n${fields[0]}\r\nbody\r\n`,
    );
  });

  it("gives a temporary verdict when DNS never answers, within the deadline", async () => {
    const silent: DNSResolver = () => new Promise(() => {});
    const started = Date.now();
    const verdict = await authenticateSender(message("x@attacker.test"), "x@attacker.test", {
      ...context,
      resolver: silent,
      limits: { maxSignatures: 5, deadlineMs: 500, lookupTimeoutMs: 200 },
    });
    expect(verdict).toMatchObject({ pass: false, reason: "auth_timeout", temporary: true });
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});

describe("fuzz: header blocks built to make the parsers disagree", () => {
  // A seeded generator, so a failure is reproducible.
  let seed = 31;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
  const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)] as T;
  const pieces = [
    "From: victim@bank.test",
    "From: x@attacker.test",
    "from:x@attacker.test",
    'From: "x@attacker.test" <victim@bank.test>',
    "From: victim@bank.test, x@attacker.test",
    "From: group: victim@bank.test;",
    "From: (x@attacker.test) victim@bank.test",
    "From: =?utf-8?q?x=40attacker.test?= <victim@bank.test>",
    " From: x@attacker.test",
    "\tx@attacker.test",
    "\x0bFrom: x@attacker.test",
    "\x0cFrom: x@attacker.test",
    "From\x00: x@attacker.test",
    "Fr om: x@attacker.test",
    "Sender: x@attacker.test",
    "Reply-To: x@attacker.test",
    "Subject: hi",
    "X-Note: From: x@attacker.test",
    ": empty name",
    "no colon here",
  ];

  it("whenever the intake would answer, mailauth read the same single From", async () => {
    const resolver: DNSResolver = async (name, type) => {
      throw Object.assign(new Error(`query${type} ENOTFOUND ${name}`), { code: "ENOTFOUND" });
    };
    let answerable = 0;
    for (let round = 0; round < 400; round += 1) {
      const lines = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(pieces));
      const separator = pick(["\r\n", "\r\n", "\n"]);
      const raw = Buffer.from(
        `${lines.join(separator)}${separator}To: earn@pay-and-earn.test${separator}${separator}${"body"}\r\n`,
        "latin1",
      );
      const mail = await readInbound(raw, false);
      if (mail.headerTrick || !mail.from) continue;
      const { headerFrom, fromFields } = await dkimVerify(raw, { resolver });
      const agree =
        fromFields === 1 &&
        headerFrom.length === 1 &&
        headerFrom[0]?.toLowerCase() === mail.from.toLowerCase();
      if (agree) {
        answerable += 1;
        continue;
      }
      // The parsers disagree on a block that passed the header check: the sender check refuses.
      const verdict = await authenticateSender(raw, mail.from, { ...context, resolver });
      expect(verdict, JSON.stringify(raw.toString("latin1"))).toMatchObject({
        pass: false,
        reason: "sender_mismatch",
      });
    }
    expect(answerable).toBeGreaterThan(10);
  }, 60_000);
});
