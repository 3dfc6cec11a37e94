import { randomBytes } from "node:crypto";
import { type Address, type Hex, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NOT_QUALIFYING_REASONS } from "../../api/reasons/reasonCatalog.ts";
import type { RunningService } from "../../api/service.ts";
import { startTestImapServer, type TestImapServer } from "../support/dovecot.ts";
import {
  amountIn,
  attachedReceipt,
  type CaughtMail,
  claimIdIn,
  freshSender,
  receiptMessageInText,
  type TestMailCatcher,
} from "../support/mail.ts";
import { MAIL_INTAKE_ADDRESS, type MailStack, startMailStack } from "../support/mailService.ts";
import { parsePrometheusText } from "../support/prometheusText.ts";
import { startTestService } from "../support/service.ts";
import type { Stack } from "../support/stack.ts";
import { atomic, USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { payingFetch } from "../support/x402.ts";

/**
 * The mail flow end to end on Anvil, with real mail servers: nodemailer writes to the SMTP
 * intake, Dovecot holds the mailbox the IMAP intake polls, and a real SMTP server catches what
 * the service sends. A person mails a payout address, gets the exact amount by reply, pays it,
 * and gets the receipt by reply; the receipt verifies with viem. The receipt mails of the claim
 * and x402 flows go out the same way; the outbox outlives a mail server that is down.
 */

let mailStack: MailStack;
let catcher: TestMailCatcher;
let stack: Stack;
let dovecot: TestImapServer;

beforeAll(async () => {
  [mailStack, dovecot] = await Promise.all([
    startMailStack({ MAIL_RETRY_SECONDS: "1", MAIL_MAX_ATTEMPTS: "6" }),
    startTestImapServer(),
  ]);
  ({ stack, catcher } = mailStack);
});

afterAll(async () => {
  await mailStack?.stop();
  await dovecot?.stop();
});

function freshAddress(): Address {
  return privateKeyToAccount(generatePrivateKey()).address;
}

/** The receipt mail: its attachment verifies with viem and matches the text and the API. */
async function expectVerifiableReceipt(mail: CaughtMail | undefined, claimId: string) {
  if (!mail) throw new Error("no receipt mail");
  const receipt = attachedReceipt(mail);
  expect(receipt.claim_id).toBe(claimId);
  expect(receipt.signer).toBe(stack.chain.receiptSigner.address);
  expect(
    await verifyMessage({
      address: receipt.signer as Address,
      message: receipt.message as string,
      signature: receipt.signature as Hex,
    }),
  ).toBe(true);
  expect(receiptMessageInText(mail.text)).toBe(receipt.message);
  expect(mail.text).toContain(`Signature: ${receipt.signature}`);
  expect(mail.text).toContain("verifyMessage");
  expect(mail.text).toContain(`${stack.service.config.http.publicUrl}/api/info`);
  const status = await stack.api(`/api/claims/${claimId}`);
  expect(mail.text).toContain(`Payout tx: ${status.body.payout_tx}`);
  expect(mail.text).toContain(`https://basescan.org/tx/${status.body.payout_tx}`);
  const onRecord = await stack.api(`/api/claims/${claimId}/receipt`);
  expect(onRecord.body.signature).toBe(receipt.signature);
  const verdict = await stack.api("/api/receipts/verify", {
    body: { message: receipt.message, signature: receipt.signature },
  });
  expect(verdict.body).toMatchObject({ genuine: true, current: true });
}

describe("earning by mail (SMTP intake)", () => {
  it("a mail in, instructions out, the exact amount paid, the receipt by reply", async () => {
    const from = freshSender("alice");
    const payoutAddress = freshAddress();
    const sent = await mailStack.send({
      from,
      subject: "Earn 1 USDC",
      text: `Hello,\n\nplease pay me at ${payoutAddress}\nagent: alice-by-mail\n`,
    });

    const [instructions] = await catcher.waitFor(from);
    expect(instructions?.subject).toBe("Re: Earn 1 USDC");
    expect(instructions?.inReplyTo).toBe(sent.messageId);
    expect(instructions?.references).toContain(sent.messageId);
    expect(instructions?.header("auto-submitted")).toBe("auto-replied");
    expect(instructions?.parsed.from?.value[0]?.address).toBe(MAIL_INTAKE_ADDRESS);
    const claimId = claimIdIn(instructions);
    const amount = amountIn(instructions);
    const claim = await stack.api(`/api/claims/${claimId}`);
    expect(claim.body).toMatchObject({
      flow: "mail",
      status: "awaiting_payment",
      payout_address: payoutAddress,
      agent_name: "alice-by-mail",
      email_receipt: true,
      amount_due_usdc: amount,
    });
    for (const fact of [
      stack.chain.payTo.address,
      "Base (chain id 8453)",
      "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      claim.body.expires_at as string,
      claim.body.status_url as string,
      "reply to this mail with its transaction hash",
    ]) {
      expect(instructions?.text).toContain(fact);
    }

    await stack.chain.transferUsdc(stack.chain.user(0), stack.chain.payTo.address, atomic(amount));
    await stack.mine(2);
    await stack.untilClaimStatus(claimId, "completed");

    const [, receiptMail, ...more] = await catcher.waitFor(from, 2);
    expect(more).toEqual([]);
    expect(receiptMail?.subject).toBe("Re: Earn 1 USDC");
    expect(receiptMail?.inReplyTo).toBe(sent.messageId);
    expect(receiptMail?.references).toEqual([sent.messageId, instructions?.messageId]);
    await expectVerifiableReceipt(receiptMail, claimId);
  });

  it("a reply carrying a tx hash attaches it to the claim of its thread", async () => {
    const from = freshSender("bob");
    const sent = await mailStack.send({ from, subject: "earn", text: freshAddress() });
    const [instructions] = await catcher.waitFor(from);
    const claimId = claimIdIn(instructions);
    // A second claim of the same sender, named in the body: the thread decides, not the words.
    const other = await mailStack.send({ from, subject: "another", text: freshAddress() });
    const otherClaimId = claimIdIn((await catcher.waitFor(from, 2))[1]);
    expect(other.messageId).not.toBe(sent.messageId);

    const payment = await stack.chain.transferUsdc(
      stack.chain.user(1),
      stack.chain.payTo.address,
      atomic(amountIn(instructions)),
    );
    await mailStack.send({
      from,
      subject: "Re: earn",
      text: `Paid: ${payment}\nfor ${otherClaimId}\n\n> ${instructions?.text.split("\n").join("\n> ")}`,
      inReplyTo: instructions?.messageId,
      references: [sent.messageId, instructions?.messageId as string],
    });
    const [, , attached] = await catcher.waitFor(from, 3);
    expect(attached?.subject).toBe("Re: earn");
    expect(attached?.text).toContain(
      `The transaction ${payment} is attached to your claim ${claimId}`,
    );
    expect((await stack.api(`/api/claims/${claimId}`)).body.tx_hash).toBe(payment);
    expect((await stack.api(`/api/claims/${otherClaimId}`)).body.tx_hash).toBeNull();

    await stack.mine(2);
    const done = await stack.untilClaimStatus(claimId, "completed");
    // The named transfer is the claim's exact amount: the amount rule, which comes before an
    // unsigned tx hash (issue 9), pays it.
    expect(done.payment).toMatchObject({ matched_by: "amount", tx_hash: payment });
    const receiptMail = (await catcher.waitFor(from, 4))[3];
    expect(receiptMail?.inReplyTo).toBe(sent.messageId);
    await expectVerifiableReceipt(receiptMail, claimId);
  });

  it("a tx hash that does not qualify, or is used already, gets the refusal's words and no claim", async () => {
    const from = freshSender("carol");
    // 10 USDC from a wallet that is not the payout address, not the exact amount: no claim's.
    const plain = await stack.chain.transferUsdc(
      stack.chain.user(2),
      stack.chain.payTo.address,
      10n * USDC,
    );
    await mailStack.send({ from, subject: "earn", text: `${freshAddress()}\npaid in ${plain}` });
    const [refused] = await catcher.waitFor(from);
    expect(refused?.text).toContain(NOT_QUALIFYING_REASONS.not_amount_due_nor_from_payout_address);
    expect(refused?.text).toContain(
      "(reason: tx_not_qualifying, not_amount_due_nor_from_payout_address)",
    );
    const [claims] = await stack.service.sql<{ n: number }[]>`
      select count(*)::int as n from app.claims where email = ${from}`;
    expect(claims?.n).toBe(0);

    // In a thread: the same hash, then one that paid another claim.
    const first = await mailStack.send({ from, subject: "earn again", text: freshAddress() });
    const [, instructions] = await catcher.waitFor(from, 2);
    const thread = {
      subject: "Re: earn again",
      inReplyTo: instructions?.messageId,
      references: [first.messageId, instructions?.messageId as string],
    };
    await mailStack.send({ from, ...thread, text: plain });
    const [usedTx] = await stack.service.sql<{ tx_hash: string }[]>`
      select tx_hash from app.payments where matched_by = 'amount' limit 1`;
    await mailStack.send({ from, ...thread, text: usedTx?.tx_hash });
    const replies = await catcher.waitFor(from, 4);
    expect(replies[2]?.text).toContain(
      NOT_QUALIFYING_REASONS.not_amount_due_nor_from_payout_address,
    );
    expect(replies[3]?.text).toContain("(reason: tx_already_used)");
    expect(replies.slice(2).map((reply) => reply.inReplyTo)).toEqual([
      expect.any(String),
      expect.any(String),
    ]);
  });

  it("/api/health reports the SMTP intake listening", async () => {
    const health = await stack.api<{
      mail: { intake: { transport: string; ok: boolean; last_ok_seconds: number } };
    }>("/api/health");
    expect(health.body.mail.intake).toMatchObject({ transport: "smtp", ok: true });
    expect(health.body.mail.intake.last_ok_seconds).toBeLessThan(60);
  });

  it("/api/info, /llms.txt and the OpenAPI description say how to earn by mail", async () => {
    const info = await stack.api("/api/info");
    expect(info.body.email).toContain(`Write to ${MAIL_INTAKE_ADDRESS}`);
    expect(info.body.email).toContain("receipt.json");
    expect((info.body.how_it_works as string[]).at(-1)).toContain(
      `write to ${MAIL_INTAKE_ADDRESS}`,
    );
    const llms = await fetch(`${stack.service.url}/llms.txt`).then((response) => response.text());
    expect(llms).toMatch(
      new RegExp(`## Pay by mail\\n\\nWrite to ${MAIL_INTAKE_ADDRESS.replace(".", "\\.")}`),
    );
    const openapi = await stack.api<{ info: { description: string } }>("/openapi.json");
    expect(openapi.body.info.description).toContain(
      `To earn by mail, write to ${MAIL_INTAKE_ADDRESS}`,
    );
  });
});

describe("earning by mail (IMAP intake, two replicas polling one mailbox)", () => {
  const replicas: RunningService[] = [];

  beforeAll(async () => {
    for (let index = 0; index < 2; index += 1) {
      replicas.push(
        await startTestService(stack.chain, stack.database.url, {
          ROLE: "api",
          MAIL_INTAKE: "imap",
          IMAP_URL: dovecot.url,
          // New mail must be noticed by IDLE, not by a poll a minute later.
          IMAP_POLL_SECONDS: "60",
          MAIL_INTAKE_ADDRESS: MAIL_INTAKE_ADDRESS,
          SMTP_URL: catcher.url,
          MAIL_REQUIRE_AUTH: "false",
        }),
      );
    }
    await waitFor(async () => {
      const health = await fetch(`${replicas[0]?.url}/api/health`).then((r) => r.json());
      return (health as { mail: { intake: { ok: boolean } | null } }).mail.intake?.ok;
    });
  });

  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
  });

  it("a mail in the mailbox, instructions out, paid, the receipt by reply; stored once, flagged after", async () => {
    const from = freshSender("dave");
    const payoutAddress = freshAddress();
    const messageId = `<imap-${randomBytes(4).toString("hex")}@client.test>`;
    const raw = [
      `From: Dave <${from}>`,
      `To: ${MAIL_INTAKE_ADDRESS}`,
      "Subject: earn by imap",
      `Message-ID: ${messageId}`,
      "Content-Type: text/html; charset=utf-8",
      "",
      `<p>My address: <b>${payoutAddress}</b></p>`,
      "",
    ].join("\r\n");
    await dovecot.deliver(raw);

    const [instructions] = await catcher.waitFor(from);
    expect(instructions?.inReplyTo).toBe(messageId);
    const claimId = claimIdIn(instructions);
    expect((await stack.api(`/api/claims/${claimId}`)).body).toMatchObject({
      flow: "mail",
      payout_address: payoutAddress,
    });
    await waitFor(
      async () => (await dovecot.flagsByMessageId()).get(messageId)?.includes("\\Seen"),
      {
        what: "the message to be flagged \\Seen",
      },
    );

    // Delivered again (a redelivery): the same stored message, nothing new happens.
    await dovecot.deliver(raw);
    await waitFor(async () => {
      const flags = await dovecot.flagsByMessageId();
      return [...flags.values()].every((list) => list.includes("\\Seen"));
    });
    const rows = await stack.service.sql<{ transport: string; status: string }[]>`
      select transport, status from app.mail_messages where message_id = ${messageId}`;
    expect(rows).toEqual([{ transport: "imap", status: "processed" }]);

    await stack.chain.transferUsdc(
      stack.chain.user(3),
      stack.chain.payTo.address,
      atomic(amountIn(instructions)),
    );
    await stack.mine(2);
    await stack.untilClaimStatus(claimId, "completed");
    const [, receiptMail, ...more] = await catcher.waitFor(from, 2);
    expect(more).toEqual([]);
    expect(receiptMail?.inReplyTo).toBe(messageId);
    await expectVerifiableReceipt(receiptMail, claimId);
    const [claims] = await stack.service.sql<{ n: number }[]>`
      select count(*)::int as n from app.claims where email = ${from}`;
    expect(claims?.n).toBe(1);
  });
});

describe("the receipt mail of the claim and x402 flows", () => {
  it("a REST claim with an email gets its receipt by mail", async () => {
    const email = freshSender("rest");
    const claim = await stack.createClaim(freshAddress(), { email });
    await stack.chain.transferUsdc(
      stack.chain.user(4),
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    const [mail, ...more] = await catcher.waitFor(email);
    expect(more).toEqual([]);
    expect(mail?.subject).toBe(`Your pay-and-earn receipt for claim ${claim.claim_id}`);
    expect(mail?.header("auto-submitted")).toBe("auto-generated");
    expect(mail?.inReplyTo).toBeUndefined();
    await expectVerifiableReceipt(mail, claim.claim_id);
  });

  it("an x402 payment with an email gets its receipt by mail", async () => {
    const email = freshSender("x402");
    const payer = stack.chain.user(5);
    const response = await payingFetch(payer.privateKey, "$10")(
      `${stack.service.url}/api/x402/earn`,
      {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ payout_address: freshAddress(), email }),
      },
    );
    expect(response.status).toBe(200);
    const { claim_id } = (await response.json()) as { claim_id: string };
    await stack.untilClaimStatus(claim_id, "completed");
    const [mail] = await catcher.waitFor(email);
    await expectVerifiableReceipt(mail, claim_id);
  });
});

describe("the outbox", () => {
  async function completeWithEmail(email: string, payer: number) {
    const claim = await stack.createClaim(freshAddress(), { email });
    await stack.chain.transferUsdc(
      stack.chain.user(payer),
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    return claim.claim_id;
  }

  async function outboxRow(claimId: string) {
    const [row] = await stack.service.sql<
      { status: string; attempts: number; last_error: string | null }[]
    >`select status, attempts, last_error from app.outbox where claim_id = ${claimId}`;
    return row;
  }

  it("retries after the SMTP server was down, and sends once when it is back", async () => {
    await catcher.stop();
    const email = freshSender("patient");
    const claimId = await completeWithEmail(email, 6);
    const failing = await waitFor(async () => {
      const row = await outboxRow(claimId);
      return row && row.attempts >= 2 && row;
    });
    expect(failing).toMatchObject({ status: "pending" });
    expect(failing.last_error).toMatch(/ECONNREFUSED|connect/i);
    const health = await stack.api<{ mail: { outbox: { pending: number } } }>("/api/health");
    expect(health.body.mail.outbox.pending).toBeGreaterThanOrEqual(1);

    await catcher.start();
    const [mail, ...more] = await catcher.waitFor(email);
    expect(more).toEqual([]);
    await expectVerifiableReceipt(mail, claimId);
    expect(await outboxRow(claimId)).toMatchObject({ status: "sent", last_error: null });
  });

  it("a recipient refused for good is failed at once, and health and metrics say so", async () => {
    catcher.refuse(550);
    const email = freshSender("refused");
    const claimId = await completeWithEmail(email, 0);
    const row = await waitFor(async () => {
      const found = await outboxRow(claimId);
      return found?.status === "failed" && found;
    });
    catcher.refuse(null);
    expect(row.attempts).toBe(1);
    expect(row.last_error).toMatch(/550/);
    expect(catcher.to(email)).toEqual([]);

    const health = await stack.api<{
      reasons: string[];
      mail: { ok: boolean; intake: { transport: string; ok: boolean }; outbox: { failed: number } };
    }>("/api/health");
    expect(health.body.reasons).toContain("mail_outbox_failed");
    expect(health.body.mail).toMatchObject({
      ok: false,
      intake: { transport: "smtp", ok: true },
      outbox: { failed: 1 },
    });

    const metrics = parsePrometheusText(
      await fetch(`${stack.service.url}/metrics`).then((response) => response.text()),
    );
    const mails = (event: string) =>
      metrics.samples.find(
        (sample) => sample.name === "pay_and_earn_mails_total" && sample.labels.event === event,
      )?.value;
    expect(mails("failed")).toBe(1);
    expect(mails("received")).toBeGreaterThanOrEqual(8);
    expect(mails("replied")).toBeGreaterThanOrEqual(8);
    expect(mails("sent")).toBeGreaterThan(mails("replied") ?? 0);
  });
});
