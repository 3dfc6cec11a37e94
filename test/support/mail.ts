import { randomBytes } from "node:crypto";
import { type ParsedMail, simpleParser } from "mailparser";
import type { SendMailOptions } from "nodemailer";
import nodemailer from "nodemailer";
import { type MailCatcher, startMailCatcher } from "../../scripts/devnet/mailCatcher.ts";
import { waitFor } from "./waitFor.ts";

/**
 * Mail for tests with real servers: a catcher (a real SMTP server, scripts/devnet/mailCatcher)
 * that keeps what the service sends, parsed, and a client (nodemailer) that writes to the
 * service's SMTP intake as any mail server would.
 */

export interface CaughtMail {
  raw: Buffer;
  parsed: ParsedMail;
  to: string[];
  subject: string;
  text: string;
  messageId: string | undefined;
  inReplyTo: string | undefined;
  references: string[];
  header(name: string): string | undefined;
}

export interface TestMailCatcher extends Omit<MailCatcher, "stop"> {
  caught: CaughtMail[];
  /** Mail caught for `address` so far. */
  to(address: string): CaughtMail[];
  /** Waits until `count` mails (default 1) have been caught for `address`; returns them all. */
  waitFor(address: string, count?: number, timeoutMs?: number): Promise<CaughtMail[]>;
  /** Stops listening (the SMTP server is then down); `start` listens again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startTestMailCatcher(): Promise<TestMailCatcher> {
  const caught: CaughtMail[] = [];
  const onMessage = async (raw: Buffer, envelope: { rcptTo: string[] }) => {
    const parsed = await simpleParser(raw);
    const references = parsed.references
      ? Array.isArray(parsed.references)
        ? parsed.references
        : [parsed.references]
      : [];
    caught.push({
      raw,
      parsed,
      to: envelope.rcptTo.map((address) => address.toLowerCase()),
      subject: parsed.subject ?? "",
      text: parsed.text ?? "",
      messageId: parsed.messageId,
      inReplyTo: parsed.inReplyTo,
      references,
      header: (name) => {
        const value = parsed.headers.get(name.toLowerCase());
        return value === undefined ? undefined : String(value);
      },
    });
  };
  let server = await startMailCatcher({ onMessage });
  const port = server.port;
  let refusal: number | null = null;
  const to = (address: string) => caught.filter((mail) => mail.to.includes(address.toLowerCase()));
  return {
    caught,
    host: server.host,
    port,
    url: server.url,
    refuse(code) {
      refusal = code;
      server.refuse(code);
    },
    to,
    waitFor: (address, count = 1, timeoutMs = 20_000) =>
      waitFor(() => to(address).length >= count && to(address), {
        timeoutMs,
        what: `${count} mail(s) to ${address} (caught so far: ${to(address).length})`,
      }),
    stop: () => server.stop(),
    async start() {
      server = await startMailCatcher({ onMessage, port });
      server.refuse(refusal);
    },
  };
}

/** Sends a mail to the SMTP intake at `port`, as a mail server would (no TLS, no login). */
export async function sendToIntake(
  port: number,
  message: SendMailOptions,
  options: {
    dkim?: { domainName: string; keySelector: string; privateKey: string };
    /** Gives up on a server that stops answering mid-session after this long (nodemailer: 10 min). */
    socketTimeout?: number;
    /** The address the client connects from (any of 127.0.0.0/8 reaches the intake). */
    localAddress?: string;
  } = {},
): Promise<{ messageId: string }> {
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port,
    secure: false,
    ignoreTLS: true,
    ...options,
  });
  try {
    const info = await transport.sendMail(message);
    // A raw message goes as it is: its own Message-ID, not the one nodemailer reports.
    if (message.raw !== undefined) {
      const head = message.raw.toString().split(/\r?\n\r?\n/)[0] ?? "";
      return { messageId: /^Message-ID:\s*(<[^>]*>)/im.exec(head)?.[1] ?? "" };
    }
    return { messageId: info.messageId };
  } finally {
    transport.close();
  }
}

/** A sender address no other test of the run writes from: `alice-3f9a0c@client.test`. */
export function freshSender(name: string): string {
  return `${name}-${randomBytes(3).toString("hex")}@client.test`;
}

/** The receipt.json attached to a mail, parsed. */
export function attachedReceipt(mail: CaughtMail): Record<string, string> {
  const attachment = mail.parsed.attachments.find((file) => file.filename === "receipt.json");
  if (!attachment) throw new Error(`no receipt.json in "${mail.subject}"`);
  return JSON.parse(attachment.content.toString("utf8")) as Record<string, string>;
}

/** The text between the receipt markers of a receipt mail (the signed message, verbatim). */
export function receiptMessageInText(text: string): string | undefined {
  return /-----BEGIN RECEIPT MESSAGE-----\r?\n([\s\S]*?)\r?\n-----END RECEIPT MESSAGE-----/.exec(
    text,
  )?.[1];
}

/** The claim id a service mail names (instructions, replies, receipts). */
export function claimIdIn(mail: CaughtMail | undefined): string {
  const claimId = /clm_[A-Za-z0-9_-]{16,43}/.exec(mail?.text ?? "")?.[0];
  if (!claimId) throw new Error(`no claim id in "${mail?.subject}":\n${mail?.text}`);
  return claimId;
}

/** The exact amount the instructions mail asks for, as "10.123456". */
export function amountIn(mail: CaughtMail | undefined): string {
  const amount = /Amount:\s+(\d+\.\d{6}) USDC/.exec(mail?.text ?? "")?.[1];
  if (!amount) throw new Error(`no amount in:\n${mail?.text}`);
  return amount;
}
