import { generateKeyPairSync } from "node:crypto";
import { dkimVerify } from "mailauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneInboundMessages } from "../../api/mailbox/inboundMessages.ts";
import { MAIL_REASONS } from "../../api/reasons/reasonCatalog.ts";
import type { RunningService } from "../../api/service.ts";
import { sendToIntake, type TestMailCatcher } from "../support/mail.ts";
import { type MailService, startMailService, zoneResolver } from "../support/mailService.ts";
import { type Exposition, parsePrometheusText, sampleValue } from "../support/prometheusText.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The mail intake against hostile and automatic mail, with a real SMTP intake (nodemailer
 * writes to it), a real SMTP server catching what the service sends, sender authentication on
 * (MAIL_REQUIRE_AUTH=true, mailauth asking a DNS the test answers) and small reply limits
 * (the budgets themselves: mailBudgets.test.ts).
 * Every message gets at most one answer, automatic ones none; nothing here crashes the intake
 * or makes a claim with a wrong payout address. (No indexer: no case here needs the chain.)
 */

const INTAKE = "earn@pay-and-earn.test";
const ADDRESS = "0x976EA74026E726554dB657fA54763abd0C3a0aa9";
const OTHER = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955";
const PER_SENDER = 3;
const OVERALL = 40;

// DNS as the test publishes it: trusted.test lets 127.0.0.1 send (SPF, no DMARC policy);
// bank.test has DMARC p=reject and lets only 192.0.2.1 send; signed.test has DMARC p=reject,
// sends from nowhere by SPF, and signs with DKIM (selector pae).
const dkimKeys = generateKeyPairSync("rsa", { modulusLength: 1024 });
const dkimPublic = dkimKeys.publicKey.export({ type: "spki", format: "der" }).toString("base64");
const dkimPrivate = dkimKeys.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
// The service's own signing key, published for pay-and-earn.test (selector out).
const serviceKeys = generateKeyPairSync("rsa", { modulusLength: 1024 });
const servicePublic = serviceKeys.publicKey
  .export({ type: "spki", format: "der" })
  .toString("base64");
const zone: Record<string, Record<string, string[][]>> = {
  "trusted.test": { TXT: [["v=spf1 ip4:127.0.0.1 ip6:::1 -all"]] },
  "bank.test": { TXT: [["v=spf1 ip4:192.0.2.1 -all"]] },
  "_dmarc.bank.test": { TXT: [["v=DMARC1; p=reject"]] },
  "signed.test": { TXT: [["v=spf1 -all"]] },
  "_dmarc.signed.test": { TXT: [["v=DMARC1; p=reject"]] },
  "pae._domainkey.signed.test": { TXT: [[`v=DKIM1; k=rsa; p=${dkimPublic}`]] },
  // The attacker's own domain, with SPF for the test's address and DMARC p=reject.
  "attacker.test": { TXT: [["v=spf1 ip4:127.0.0.1 ip6:::1 -all"]] },
  "_dmarc.attacker.test": { TXT: [["v=DMARC1; p=reject"]] },
  "out._domainkey.pay-and-earn.test": { TXT: [[`v=DKIM1; k=rsa; p=${servicePublic}`]] },
};
const lookups: string[] = [];

const resolver = zoneResolver(zone, lookups);

let catcher: TestMailCatcher;
let service: RunningService;
let mail: MailService;

beforeAll(async () => {
  mail = await startMailService(
    {
      MAIL_INTAKE_ADDRESS: INTAKE,
      MAIL_REQUIRE_AUTH: "true",
      MAIL_MAX_BYTES: String(256 * 1024),
      MAIL_REPLIES_PER_SENDER_PER_HOUR: String(PER_SENDER),
      MAIL_REPLIES_PER_HOUR: String(OVERALL),
      DKIM_PRIVATE_KEY: serviceKeys.privateKey
        .export({ type: "pkcs8", format: "pem" })
        .toString()
        .replaceAll("\n", "\\n"),
      DKIM_SELECTOR: "out",
    },
    resolver,
  );
  ({ catcher, service } = mail);
});

afterAll(async () => {
  await mail?.stop();
});

function send(message: Parameters<typeof sendToIntake>[1]) {
  return sendToIntake(service.smtpIntake?.port ?? 0, { to: INTAKE, ...message });
}

interface MessageRow {
  status: string;
  outcome: string;
  claim_id: string | null;
  truncated: boolean;
  size_bytes: bigint;
}

/** Waits until the message is acted on and every mail it caused is out; returns its row. */
async function actedOn(messageId: string): Promise<MessageRow> {
  const row = await waitFor(
    async () => {
      const [found] = await service.sql<MessageRow[]>`
        select status, outcome, claim_id, truncated, size_bytes
        from app.mail_messages where message_id = ${messageId}`;
      return found && found.status !== "received" ? found : undefined;
    },
    { what: `the message ${messageId} to be acted on` },
  );
  await waitFor(
    async () => {
      const [pending] = await service.sql`select 1 from app.outbox where status = 'pending'`;
      return pending === undefined;
    },
    { what: "the outbox to be empty" },
  );
  return row;
}

async function scrape(): Promise<Exposition> {
  return parsePrometheusText(await fetch(`${service.url}/metrics`).then((r) => r.text()));
}

async function claimsFor(email: string) {
  return service.sql<{ id: string; payout_address: string; flow: string }[]>`
    select id, payout_address, flow from app.claims where email = ${email} order by created_at`;
}

describe("bad input: at most one clear answer, never a claim with a wrong address", () => {
  it("a body with no address gets one reply saying how to write", async () => {
    const from = "noaddress@trusted.test";
    const sent = await send({ from, subject: "hello", text: "Please pay me." });
    expect(await actedOn(sent.messageId)).toMatchObject({
      status: "processed",
      outcome: "no_address",
    });
    const [reply, ...more] = await catcher.waitFor(from);
    expect(more).toEqual([]);
    expect(reply?.subject).toBe("Re: hello");
    expect(reply?.inReplyTo).toBe(sent.messageId);
    expect(reply?.header("auto-submitted")).toBe("auto-replied");
    expect(reply?.text).toContain(MAIL_REASONS.no_address.slice(0, 40));
    expect(reply?.text).toContain(`write to ${INTAKE}`);
    expect(await claimsFor(from)).toEqual([]);
    // Signed with the service's DKIM key, as a receiving server checks it.
    const { results } = await dkimVerify(reply?.raw as Buffer, { resolver });
    expect(results.map((result) => [result.signingDomain, result.status?.result])).toEqual([
      ["pay-and-earn.test", "pass"],
    ]);
  });

  it("two different addresses get one reply naming both, and no claim", async () => {
    const from = "twoaddresses@trusted.test";
    const sent = await send({ from, subject: "earn", text: `${ADDRESS}\n${OTHER}` });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "two_addresses" });
    const [reply] = await catcher.waitFor(from);
    expect(reply?.text).toContain(MAIL_REASONS.two_addresses.slice(0, 40));
    expect(reply?.text).toContain(ADDRESS);
    expect(reply?.text).toContain(OTHER);
    expect(await claimsFor(from)).toEqual([]);
  });

  it("a mixed-case address with a bad checksum gets the claim's own refusal, and no claim", async () => {
    const from = "checksum@trusted.test";
    const broken = `${ADDRESS.slice(0, -1)}A`;
    const sent = await send({ from, subject: "earn", text: broken });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "claim_refused" });
    const [reply] = await catcher.waitFor(from);
    expect(reply?.text).toContain("payout_address: must be a 0x address");
    expect(reply?.text).toContain("valid EIP-55 checksum");
    expect(reply?.text).toContain("(reason: invalid_request)");
    expect(await claimsFor(from)).toEqual([]);
  });

  it("10 MB of attachments: stored as headers only, one reply about the size, no claim", async () => {
    const from = "large@trusted.test";
    const sent = await send({
      from,
      subject: "earn",
      text: ADDRESS,
      attachments: [{ filename: "big.bin", content: Buffer.alloc(10 * 1024 * 1024, 7) }],
    });
    const row = await actedOn(sent.messageId);
    expect(row).toMatchObject({ status: "processed", outcome: "too_large", truncated: true });
    expect(Number(row.size_bytes)).toBeGreaterThan(10 * 1024 * 1024);
    const [stored] = await service.sql<{ bytes: number }[]>`
      select length(raw) as bytes from app.mail_messages where message_id = ${sent.messageId}`;
    expect(stored?.bytes).toBeLessThan(64 * 1024);
    const [reply, ...more] = await catcher.waitFor(from);
    expect(more).toEqual([]);
    expect(reply?.text).toContain(MAIL_REASONS.too_large.slice(0, 40));
    expect(await claimsFor(from)).toEqual([]);
  });

  it("a message with no Message-ID makes its claim once, even when delivered twice", async () => {
    const from = "nomessageid@trusted.test";
    const raw = `From: ${from}\r\nTo: ${INTAKE}\r\nSubject: earn\r\n\r\n${ADDRESS}\r\nagent: no-id\r\n`;
    await send({ envelope: { from, to: [INTAKE] }, raw });
    await send({ envelope: { from, to: [INTAKE] }, raw });
    const rows = await waitFor(async () => {
      const found = await service.sql<{ message_id: string; status: string }[]>`
        select message_id, status from app.mail_messages where from_address = ${from}`;
      return found.length === 1 && found[0]?.status === "processed" && found;
    });
    expect(rows[0]?.message_id).toMatch(/@no-message-id\.invalid>$/);
    await actedOn(rows[0]?.message_id as string);
    const [reply, ...more] = await catcher.waitFor(from);
    expect(more).toEqual([]);
    expect(reply?.inReplyTo).toBeUndefined();
    const claims = await claimsFor(from);
    expect(claims).toEqual([
      expect.objectContaining({ payout_address: ADDRESS.toLowerCase(), flow: "mail" }),
    ]);
    expect(reply?.text).toContain(claims[0]?.id);
  });

  it("a malformed MIME tree or a huge header block never stops the intake", async () => {
    const from = "malformed@trusted.test";
    const broken = await send({
      envelope: { from, to: [INTAKE] },
      raw: [
        `From: ${from}`,
        `To: ${INTAKE}`,
        "Message-ID: <broken-mime@trusted.test>",
        'Content-Type: multipart/mixed; boundary="outer"',
        "",
        "--outer",
        'Content-Type: multipart/alternative; boundary="inner"',
        "",
        "--never-closed",
        "Content-Transfer-Encoding: base64",
        "",
        "!!!! not base64 @@@@",
        "--outer",
        "Content-Type: text/plain; charset=nonsense-charset",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        "=ZZ=",
        "",
      ].join("\r\n"),
    });
    const huge = await send({
      envelope: { from, to: [INTAKE] },
      raw: `From: ${from}\r\nMessage-ID: <huge-headers@trusted.test>\r\nX-Filler: ${"h".repeat(100_000)}\r\n\r\n${ADDRESS}\r\n`,
    });
    expect((await actedOn(broken.messageId)).status).toBe("processed");
    expect(await actedOn(huge.messageId)).toMatchObject({
      status: "rejected",
      outcome: "headers_too_large",
    });
    // The intake goes on: the next message is answered as usual.
    const next = await send({ from, subject: "earn", text: ADDRESS });
    expect(await actedOn(next.messageId)).toMatchObject({ outcome: "claim_created" });
    const replies = await catcher.waitFor(from, 2);
    expect(replies).toHaveLength(2);
    expect(replies.map((reply) => reply.inReplyTo)).toEqual([broken.messageId, next.messageId]);
    expect((await claimsFor(from)).map((claim) => claim.payout_address)).toEqual([
      ADDRESS.toLowerCase(),
    ]);
  });

  it("mail for another address is refused at SMTP and never stored", async () => {
    await expect(
      sendToIntake(service.smtpIntake?.port ?? 0, {
        from: "someone@trusted.test",
        to: "postmaster@pay-and-earn.test",
        text: ADDRESS,
      }),
    ).rejects.toThrow(/550/);
  });

  it("the From header never sets the payout address: the body's address does", async () => {
    const from = "display@trusted.test";
    const sent = await send({
      from: { name: OTHER, address: from },
      subject: OTHER,
      text: ADDRESS,
    });
    // The subject's address counts (it is the person's words); the From's never does.
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "two_addresses" });
    const plain = await send({
      from: { name: OTHER, address: from },
      subject: "earn",
      text: ADDRESS,
    });
    expect(await actedOn(plain.messageId)).toMatchObject({ outcome: "claim_created" });
    expect((await claimsFor(from)).map((claim) => claim.payout_address)).toEqual([
      ADDRESS.toLowerCase(),
    ]);
  });

  it("a reply in the thread cannot change the payout address", async () => {
    const from = "changer@trusted.test";
    const first = await send({ from, subject: "earn", text: ADDRESS });
    await actedOn(first.messageId);
    const [instructions] = await catcher.waitFor(from);
    const reply = await send({
      from,
      subject: "Re: earn",
      text: `Please pay ${OTHER} instead.`,
      inReplyTo: instructions?.messageId,
      references: [first.messageId, instructions?.messageId as string],
    });
    expect(await actedOn(reply.messageId)).toMatchObject({ outcome: "status_sent" });
    const [, answer] = await catcher.waitFor(from, 2);
    expect(answer?.text).toContain(MAIL_REASONS.payout_address_fixed.slice(0, 40));
    expect(answer?.text).toContain("is awaiting payment");
    expect((await claimsFor(from)).map((claim) => claim.payout_address)).toEqual([
      ADDRESS.toLowerCase(),
    ]);
  });
});

describe("no answer to automatic mail, so no loop", () => {
  const automatic: [string, Parameters<typeof send>[0]][] = [
    ["Auto-Submitted", { headers: { "Auto-Submitted": "auto-replied" } }],
    ["Precedence: bulk", { headers: { Precedence: "bulk" } }],
    ["List-Id", { headers: { "List-Id": "<news.trusted.test>" } }],
    ["an empty return path (a bounce)", { envelope: { from: "", to: [INTAKE] } }],
  ];
  for (const [what, extra] of automatic) {
    it(`${what}: stored, ignored, never answered`, async () => {
      const from = `robot-${what.replace(/\W+/g, "-").toLowerCase()}@trusted.test`;
      const sent = await send({ from, subject: "Out of office", text: ADDRESS, ...extra });
      expect(await actedOn(sent.messageId)).toMatchObject({
        status: "ignored",
        outcome: "automatic",
      });
      expect(catcher.to(from)).toEqual([]);
      expect(await claimsFor(from)).toEqual([]);
    });
  }

  it("MAILER-DAEMON: ignored", async () => {
    const from = "MAILER-DAEMON@trusted.test";
    const sent = await send({ from, subject: "Undelivered Mail", text: ADDRESS });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "automatic" });
    expect(catcher.to(from)).toEqual([]);
  });

  it("our own reply sent back, or a message claiming to be ours: ignored", async () => {
    const from = "looper@trusted.test";
    const first = await send({ from, subject: "earn", text: "no address here" });
    await actedOn(first.messageId);
    const [ours] = await catcher.waitFor(from);
    // A forwarding rule sends our reply straight back, as it is.
    const back = await send({ envelope: { from: INTAKE, to: [INTAKE] }, raw: ours?.raw as Buffer });
    expect(await actedOn(back.messageId)).toMatchObject({ status: "ignored" });
    // Our Message-ID on a message with no automatic header at all.
    const forged = await send({
      from,
      subject: "earn",
      text: ADDRESS,
      messageId: `<pae.999999.none@pay-and-earn.test>`,
    });
    expect(await actedOn(forged.messageId)).toMatchObject({ outcome: "own_message" });
    // From our own address.
    const self = await send({ from: INTAKE, subject: "earn", text: ADDRESS });
    expect(await actedOn(self.messageId)).toMatchObject({ outcome: "own_message" });
    expect(catcher.to(from)).toHaveLength(1);
    expect(catcher.to(INTAKE)).toEqual([]);
  });
});

describe("sender authentication (MAIL_REQUIRE_AUTH=true)", () => {
  it("a forged From of a domain with DMARC p=reject gets no answer and no claim", async () => {
    const from = "ceo@bank.test";
    const sent = await send({ from, subject: "earn", text: ADDRESS });
    expect(await actedOn(sent.messageId)).toMatchObject({
      status: "rejected",
      outcome: "unauthenticated",
    });
    expect(lookups).toContain("TXT _dmarc.bank.test");
    expect(catcher.to(from)).toEqual([]);
    expect(await claimsFor(from)).toEqual([]);
  });

  it("a domain that publishes nothing gets no answer", async () => {
    const from = "someone@nowhere.test";
    const sent = await send({ from, subject: "earn", text: ADDRESS });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "unauthenticated" });
    expect(catcher.to(from)).toEqual([]);
  });

  it("a DKIM signature of the From domain passes DMARC: answered", async () => {
    const from = "alice@signed.test";
    const sent = await sendToIntake(
      service.smtpIntake?.port ?? 0,
      { from, to: INTAKE, subject: "earn", text: ADDRESS },
      { dkim: { domainName: "signed.test", keySelector: "pae", privateKey: dkimPrivate } },
    );
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "claim_created" });
    expect(lookups).toContain("TXT pae._domainkey.signed.test");
    expect(await catcher.waitFor(from)).toHaveLength(1);
  });
});

describe("the address answered is the one DMARC checked", () => {
  // mailauth reads the \x0b line as a second From (the attacker's, which passes DMARC);
  // mailparser folds it into the first (the victim's), the address that would be answered.
  const tricks: [string, string][] = [
    ["a line starting with \\x0b", "From: victim@bank.test\r\n\x0bFrom: x@attacker.test"],
    ["two From fields", "From: victim@bank.test\r\nFrom: x@attacker.test"],
    [
      "a From field with a control character in its name",
      "From: victim@bank.test\r\nFr\x00om: x@attacker.test",
    ],
    ["a bare CR", "From: victim@bank.test\rFrom: x@attacker.test"],
  ];
  for (const [what, fromLines] of tricks) {
    it(`${what}: no reply to the victim, no claim`, async () => {
      const id = `<trick-${what.replace(/\W+/g, "-")}@attacker.test>`;
      const sent = await send({
        envelope: { from: "x@attacker.test", to: [INTAKE] },
        raw: `${fromLines}\r\nTo: ${INTAKE}\r\nSubject: Wire the funds today\r\nMessage-ID: ${id}\r\n\r\n${ADDRESS}\r\n`,
      });
      expect(sent.messageId).toBe(id);
      expect(await actedOn(id)).toMatchObject({ status: "rejected", outcome: "header_trick" });
      expect(catcher.to("victim@bank.test")).toEqual([]);
      expect(catcher.to("x@attacker.test")).toEqual([]);
      expect(await claimsFor("victim@bank.test")).toEqual([]);
    });
  }

  it("the attacker's own plain message still passes DMARC and is answered", async () => {
    const from = "x@attacker.test";
    const sent = await send({ from, subject: "earn", text: "no address" });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "no_address" });
    expect(await catcher.waitFor(from)).toHaveLength(1);
  });
});

describe("retention", () => {
  it("a message acted on keeps only its header block", async () => {
    const from = "private@trusted.test";
    const sent = await send({
      from,
      subject: "earn",
      text: `${ADDRESS}\nmy secret note: do-not-keep-this-body`,
    });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "claim_created" });
    const [row] = await service.sql<{ raw: Buffer; size_bytes: bigint }[]>`
      select raw, size_bytes from app.mail_messages where message_id = ${sent.messageId}`;
    const kept = row?.raw.toString("latin1") ?? "";
    expect(kept).toContain(`Message-ID: ${sent.messageId}`);
    expect(kept).not.toContain("do-not-keep-this-body");
    expect(kept).not.toMatch(/\r?\n\r?\n/);
    expect(Number(row?.size_bytes)).toBeGreaterThan(kept.length);
    // The thread still works: a reply in it is answered in it.
    const [instructions] = await catcher.waitFor(from);
    const reply = await send({
      from,
      subject: "Re: earn",
      text: "status?",
      inReplyTo: instructions?.messageId,
      references: [sent.messageId, instructions?.messageId as string],
    });
    expect(await actedOn(reply.messageId)).toMatchObject({ outcome: "status_sent" });
    const [, status] = await catcher.waitFor(from, 2);
    expect(status?.references).toContain(sent.messageId);
  });

  it("messages older than MAIL_RETENTION_DAYS are deleted, but not those of an open claim", async () => {
    const unanswered = await send({ from: "old@nowhere.test", subject: "x", text: ADDRESS });
    const claimed = await send({ from: "oldclaim@trusted.test", subject: "earn", text: OTHER });
    await actedOn(unanswered.messageId);
    expect(await actedOn(claimed.messageId)).toMatchObject({ outcome: "claim_created" });
    await service.sql`
      update app.mail_messages set processed_at = now() - interval '31 days'
      where message_id in (${unanswered.messageId}, ${claimed.messageId})`;
    const before = await scrape();
    expect(await pruneInboundMessages(service.sql, 30)).toBeGreaterThanOrEqual(1);
    const left = await service.sql<{ message_id: string }[]>`
      select message_id from app.mail_messages
      where message_id in (${unanswered.messageId}, ${claimed.messageId})`;
    expect(left.map((row) => row.message_id)).toEqual([claimed.messageId]);

    // /metrics: the rows kept go down, the counters of mail received do not (a counter that
    // drops reads as a restart to Prometheus, and its rate as a burst of mail).
    const unauthenticated = { status: "rejected", outcome: "unauthenticated" };
    const kept = (exposition: Exposition) =>
      sampleValue(exposition, "pay_and_earn_mail_messages", unauthenticated) ?? 0;
    const after = await waitFor(
      async () => {
        const exposition = await scrape();
        return kept(exposition) === kept(before) - 1 && exposition;
      },
      { what: "a scrape after the prune" },
    );
    for (const event of ["received", "rejected"]) {
      expect(sampleValue(after, "pay_and_earn_mails_total", { event }), event).toBe(
        sampleValue(before, "pay_and_earn_mails_total", { event }),
      );
    }
  });
});

describe("mail speaks to people", () => {
  it("the instructions link the claim's page for people, with the JSON beside it for programs", async () => {
    const from = "person@trusted.test";
    const sent = await send({ from, subject: "earn", text: ADDRESS });
    expect(await actedOn(sent.messageId)).toMatchObject({ outcome: "claim_created" });
    const [instructions] = await catcher.waitFor(from);
    const claimId = (await claimsFor(from))[0]?.id as string;
    const page = /Your claim's page \(it follows your payment live\): (\S+)/.exec(
      instructions?.text ?? "",
    )?.[1];
    const json = /For programs \(JSON\): (\S+)/.exec(instructions?.text ?? "")?.[1];
    // The links name PUBLIC_URL (here http://localhost:<port>); fetched at the service's address.
    expect(new URL(page as string).pathname).toBe(`/claims/${claimId}`);
    expect(new URL(json as string).pathname).toBe(`/api/claims/${claimId}`);
    expect(new URL(page as string).origin).toBe(new URL(json as string).origin);
    const html = await fetch(`${service.url}/claims/${claimId}`, {
      headers: { accept: "text/html" },
    });
    expect(html.headers.get("content-type")).toMatch(/^text\/html/);
    const body = await html.text();
    expect(body).toContain(claimId);
    expect(body).toContain('id="live-status"');
    const api = await fetch(`${service.url}/api/claims/${claimId}`);
    expect(api.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await api.json()).toMatchObject({ claim_id: claimId, status: "awaiting_payment" });
  });
});
