import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { isTrustedRelay } from "../../api/config/mailSettings.ts";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { ConfigError } from "../../api/config/settings.ts";
import { automaticSign } from "../../api/mail/automaticMail.ts";
import {
  claimInThread,
  isOwnMessageIdFormat,
  outboundMessageId,
} from "../../api/mail/messageIds.ts";
import {
  headerBlock,
  MAX_HEADER_BYTES,
  readRawHeaders,
  storageMessageId,
} from "../../api/mail/rawHeaders.ts";
import { readInbound } from "../../api/mail/readInbound.ts";
import { ownWords, readRequest } from "../../api/mail/readRequest.ts";
import { askedBeyond } from "../../api/mailRequests/mailRequest.ts";

/** The mail flow's reading of messages, without any server: what a mail asks for, and when not to answer. */

const CHECKSUMMED = "0x976EA74026E726554dB657fA54763abd0C3a0aa9";
const OTHER = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955";
const HASH = `0x${"ab".repeat(32)}`;

describe("reading what a mail asks for", () => {
  it("finds the payout address in the body or the subject, and an agent line", () => {
    expect(
      readRequest({ subject: "", text: `Hi,\nmy address: ${CHECKSUMMED}\nagent: bob\n` }),
    ).toEqual({
      addresses: [CHECKSUMMED],
      txHashes: [],
      agentName: "bob",
    });
    expect(readRequest({ subject: `pay me at ${CHECKSUMMED}`, text: "" }).addresses).toEqual([
      CHECKSUMMED,
    ]);
  });

  it("counts one address written twice (any case) once, and keeps the mixed-case form", () => {
    const request = readRequest({
      subject: CHECKSUMMED.toLowerCase(),
      text: `${CHECKSUMMED} and again ${CHECKSUMMED.toLowerCase()}`,
    });
    expect(request.addresses).toEqual([CHECKSUMMED]);
  });

  it("keeps a mixed-case address with a broken checksum as written, for the claim's check to refuse", () => {
    const broken = `${CHECKSUMMED.slice(0, -1)}A`;
    expect(readRequest({ subject: "", text: broken }).addresses).toEqual([broken]);
  });

  it("reports two different addresses rather than choosing", () => {
    const request = readRequest({ subject: "", text: `${CHECKSUMMED}\n${OTHER}` });
    expect(request.addresses).toEqual([CHECKSUMMED, OTHER]);
  });

  it("tells a transaction hash from an address, and reads neither inside longer hex", () => {
    const request = readRequest({
      subject: "",
      text: `${CHECKSUMMED} paid in ${HASH.toUpperCase().replace("0X", "0x")} not 0x${"1".repeat(41)}`,
    });
    expect(request.addresses).toEqual([CHECKSUMMED]);
    expect(request.txHashes).toEqual([HASH]);
  });

  it("ignores quoted text, an earlier message and the signature", () => {
    const text = [
      HASH,
      "",
      "On Mon, 1 Jan 2026 at 10:00, pay-and-earn <earn@example.com> wrote:",
      `> Pay to: ${OTHER}`,
      "",
    ].join("\n");
    expect(readRequest({ subject: "", text }).addresses).toEqual([]);
    expect(readRequest({ subject: "", text }).txHashes).toEqual([HASH]);
    expect(ownWords(`${CHECKSUMMED}\n-- \nAlice, ETH ${OTHER}`)).toBe(CHECKSUMMED);
    expect(ownWords(`${CHECKSUMMED}\n> ${OTHER}\nthanks`)).toBe(`${CHECKSUMMED}\nthanks`);
    expect(
      readRequest({
        subject: "",
        text: `${CHECKSUMMED}\nFrom: pay-and-earn\nSent: Monday\nPay to: ${OTHER}`,
      }).addresses,
    ).toEqual([CHECKSUMMED]);
  });

  it("leaves out the addresses and hashes it is told to (the service's own, a thread's known ones)", () => {
    // What is written is read whole; the core leaves out what does not count.
    const request = askedBeyond(
      readRequest({ subject: "", text: `${OTHER} ${CHECKSUMMED} ${HASH}` }),
      {
        addresses: [OTHER.toLowerCase()],
        txHashes: [HASH],
      },
    );
    expect(request).toEqual({ addresses: [CHECKSUMMED], txHashes: [], agentName: null });
  });
});

describe("reading a raw message", () => {
  it("keys a message by its Message-ID, or by a digest of its bytes when it has none", () => {
    const withId = Buffer.from("Message-ID: <abc@example.com>\r\nSubject: x\r\n\r\nbody");
    expect(storageMessageId(withId, readRawHeaders(headerBlock(withId).bytes))).toBe(
      "<abc@example.com>",
    );
    const without = Buffer.from("Subject: x\r\n\r\nbody");
    const key = storageMessageId(without, readRawHeaders(headerBlock(without).bytes));
    expect(key).toMatch(/^<[0-9a-f]{64}@no-message-id\.invalid>$/);
    expect(storageMessageId(Buffer.from(without), readRawHeaders(headerBlock(without).bytes))).toBe(
      key,
    );
    const odd = Buffer.from(`Message-ID: <${"x".repeat(300)}@example.com>\r\n\r\n`);
    expect(storageMessageId(odd, readRawHeaders(headerBlock(odd).bytes))).toMatch(
      /no-message-id\.invalid>$/,
    );
  });

  it("unfolds headers and says when the header block is too large to read", async () => {
    const folded = Buffer.from("Subject: one\r\n  two\r\nX-A: 1\r\nX-A: 2\r\n\r\nbody");
    const headers = readRawHeaders(headerBlock(folded).bytes);
    expect(headers.get("subject")).toEqual(["one two"]);
    expect(headers.get("x-a")).toEqual(["1", "2"]);

    const huge = Buffer.from(
      `From: a@example.com\r\nX-Big: ${"y".repeat(MAX_HEADER_BYTES)}\r\n\r\n${CHECKSUMMED}`,
    );
    expect(headerBlock(huge).complete).toBe(false);
    expect((await readInbound(huge, false)).headersTooLarge).toBe(true);
  });

  it("reads a message stored over MAIL_MAX_BYTES by its header block, unless that was cut off", async () => {
    // Stored as its header block and the blank line that ended it (acceptInbound.ts) …
    const whole = Buffer.from("From: a@example.com\r\nSubject: big\r\n\r\n");
    expect(await readInbound(whole, true)).toMatchObject({
      headersTooLarge: false,
      from: "a@example.com",
    });
    // … or, when no blank line came within the bytes kept, as the header bytes alone: the rest
    // of the header block (another From, say) was never read, so none of it is believed.
    const cut = Buffer.from(`From: a@example.com\r\nX-Big: ${"y".repeat(1_000)}`);
    expect(await readInbound(cut, true)).toMatchObject({ headersTooLarge: true, from: null });
    expect(await readInbound(cut, false)).toMatchObject({ headersTooLarge: false });
  });

  it("reads an HTML-only message as text, with its blockquotes quoted", async () => {
    const mail = await readInbound(
      Buffer.from(
        [
          "From: Alice <alice@example.com>",
          "Subject: earn",
          "Content-Type: text/html; charset=utf-8",
          "",
          `<p>pay me: <b>${CHECKSUMMED}</b></p><blockquote>${OTHER}</blockquote>`,
        ].join("\r\n"),
      ),
      false,
    );
    expect(mail.from).toBe("alice@example.com");
    expect(readRequest(mail).addresses).toEqual([CHECKSUMMED]);
  });

  it("never throws on a broken MIME tree and answers nobody when From holds several addresses", async () => {
    const broken = await readInbound(
      Buffer.from(
        'From: a@example.com, b@example.com\r\nContent-Type: multipart/mixed; boundary="x"\r\n\r\n--x\r\nContent-Type: multipart/alternative\r\n\r\n--y\r\nhello\r\n--x\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!!@@@\r\n',
      ),
      false,
    );
    expect(broken.from).toBeNull();
  });
});

describe("mail that is never answered", () => {
  const sign = async (head: string, envelopeFrom: string | null = "alice@example.com") => {
    const mail = await readInbound(Buffer.from(`${head}\r\n\r\nhello`), false);
    return automaticSign({ ...mail, envelopeFrom });
  };

  it("recognises auto-replies, bounces, lists and bulk mail", async () => {
    const from = "From: alice@example.com";
    expect(await sign(`${from}\r\nAuto-Submitted: auto-replied`)).toMatch(/Auto-Submitted/);
    expect(await sign(`${from}\r\nAuto-Submitted: no`)).toBeNull();
    expect(await sign(`${from}\r\nPrecedence: bulk`)).toMatch(/Precedence/);
    expect(await sign(`${from}\r\nPrecedence: list`)).toMatch(/Precedence/);
    expect(await sign(`${from}\r\nList-Id: <news.example.com>`)).toBe("list-id");
    expect(await sign(`${from}\r\nX-Autoreply: yes`)).toBe("x-autoreply");
    expect(await sign(from, "")).toMatch(/empty return path/);
    expect(await sign(`${from}\r\nReturn-Path: <>`, null)).toMatch(/empty return path/);
    expect(await sign("From: MAILER-DAEMON@mx.example.com")).toMatch(/mailer-daemon/);
    expect(
      await sign(`${from}\r\nContent-Type: multipart/report; report-type=delivery-status`),
    ).toMatch(/report/);
    expect(await sign(from)).toBeNull();
  });

  it("recognises our own Message-IDs, and finds a thread's claim only in ours", () => {
    const claimId = "clm_AAAAAAAAAAAAAAAAAAAAAA";
    const ours = outboundMessageId(7n, claimId, "earn.example");
    expect(ours).toBe(`<pae.7.${claimId}@earn.example>`);
    expect(isOwnMessageIdFormat(ours, "earn.example")).toBe(true);
    expect(isOwnMessageIdFormat(ours, "other.example")).toBe(false);
    expect(
      claimInThread(
        { inReplyTo: ["<x@mail.example>"], references: [ours, "<x@mail.example>"] },
        "earn.example",
      ),
    ).toBe(claimId);
    expect(
      claimInThread(
        { inReplyTo: [`<pae.7.${claimId}@evil.example>`], references: [] },
        "earn.example",
      ),
    ).toBeNull();
  });
});

describe("mail settings", () => {
  const valid = {
    RPC_URL: "http://127.0.0.1:8545",
    DATABASE_URL: "postgres://postgres@127.0.0.1:5432/test",
    PAY_TO: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    PAYOUT_PRIVATE_KEY: `0x${"11".repeat(32)}`,
    RECEIPT_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
    FACILITATOR_PRIVATE_KEY: `0x${"33".repeat(32)}`,
  };
  const problemsOf = (env: Record<string, string>) => {
    try {
      parseServiceConfig({ ...valid, ...env });
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };

  it("is off by default and checks what an intake needs at start-up", () => {
    expect(parseServiceConfig(valid).mail.intake).toBe("off");
    expect(problemsOf({ MAIL_INTAKE: "smtp" })).toEqual([
      "MAIL_INTAKE_ADDRESS is required with MAIL_INTAKE=smtp",
      "SMTP_URL is required with MAIL_INTAKE=smtp (replies go out)",
    ]);
    expect(
      problemsOf({
        MAIL_INTAKE: "imap",
        MAIL_INTAKE_ADDRESS: "earn@example.com",
        SMTP_URL: "smtp://127.0.0.1:25",
        IMAP_URL: "imap://127.0.0.1/INBOX",
      }),
    ).toEqual(["IMAP_URL must carry the user and password (imaps://user:password@host/INBOX)"]);
    expect(problemsOf({ MAIL_INTAKE: "pop3", SMTP_URL: "http://x" })).toEqual([
      "MAIL_INTAKE must be off, smtp or imap",
      "SMTP_URL is not a smtp:// or smtps:// URL (smtp://user:password@host:587)",
    ]);
    expect(problemsOf({ SMTP_URL: "smtp://127.0.0.1", DKIM_PRIVATE_KEY: "nope" })).toEqual([
      "MAIL_FROM is required with SMTP_URL (the From of every mail sent)",
      "DKIM_PRIVATE_KEY is not a PEM private key",
      "DKIM_SELECTOR is required with DKIM_PRIVATE_KEY",
    ]);
  });

  it("trusts Received headers only from the relays named in MAIL_TRUSTED_RELAYS", () => {
    expect(problemsOf({ MAIL_TRUST_RECEIVED: "true" })).toEqual([
      "MAIL_TRUSTED_RELAYS is required with MAIL_TRUST_RECEIVED=true (the relays whose Received header is trusted; anyone else could write one)",
    ]);
    expect(problemsOf({ MAIL_TRUSTED_RELAYS: "10.0.0.1, relay.example.com" })).toEqual([
      "MAIL_TRUSTED_RELAYS must be IP addresses or CIDR ranges separated by commas (10.0.0.5, 192.0.2.0/24, ::1)",
    ]);
    expect(problemsOf({ MAIL_TRUSTED_RELAYS: "10.0.0.0/33" })).toHaveLength(1);
    const { trustedRelays } = parseServiceConfig({
      ...valid,
      MAIL_TRUST_RECEIVED: "true",
      MAIL_TRUSTED_RELAYS: "10.1.0.0/16, 192.0.2.7, 2001:db8::/32",
    }).mail;
    expect(isTrustedRelay(trustedRelays, "10.1.200.3")).toBe(true);
    expect(isTrustedRelay(trustedRelays, "::ffff:192.0.2.7")).toBe(true);
    expect(isTrustedRelay(trustedRelays, "2001:db8::25")).toBe(true);
    expect(isTrustedRelay(trustedRelays, "192.0.2.8")).toBe(false);
    expect(isTrustedRelay(trustedRelays, "10.2.0.1")).toBe(false);
    expect(isTrustedRelay(trustedRelays, null)).toBe(false);
    expect(isTrustedRelay(trustedRelays, "not an address")).toBe(false);
  });

  it("reads the IMAP URL and a DKIM key given with \\n escapes", () => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    const config = parseServiceConfig({
      ...valid,
      MAIL_INTAKE: "imap",
      MAIL_INTAKE_ADDRESS: "Earn@Example.com",
      SMTP_URL: "smtps://u:p@smtp.example.com",
      IMAP_URL: "imaps://earn%40example.com:s%2Fcret@imap.example.com/Earn%20box",
      DKIM_PRIVATE_KEY: pem.replaceAll("\n", "\\n"),
      DKIM_SELECTOR: "pae",
    });
    expect(config.mail.imap).toMatchObject({
      host: "imap.example.com",
      port: 993,
      secure: true,
      user: "earn@example.com",
      password: "s/cret",
      mailbox: "Earn box",
    });
    expect(config.mail.from).toBe("Earn@Example.com");
    expect(config.mail.domain).toBe("example.com");
    expect(config.mail.dkim).toEqual({
      domainName: "example.com",
      keySelector: "pae",
      privateKey: pem,
    });
    expect(config.mail.requireAuth).toBe(true);
  });
});
