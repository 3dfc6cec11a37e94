import { hostname } from "node:os";
import { isTrustedRelay } from "../config/mailSettings.ts";
import type { StoredInbound } from "../mailbox/inboundMessages.ts";
import type { MailRequest } from "../mailRequests/mailRequest.ts";
import { authenticateSender, type SenderVerdict } from "./authenticateSender.ts";
import { automaticSign } from "./automaticMail.ts";
import { isOwnMailAddress, type MailContext } from "./mailContext.ts";
import { claimInThread, isOwnMessageIdFormat } from "./messageIds.ts";
import { headerBlock } from "./rawHeaders.ts";
import { type InboundMail, readInbound } from "./readInbound.ts";
import { readRequest } from "./readRequest.ts";

/**
 * The mail processor: takes stored messages one at a time, oldest first, reads each (its
 * header block, automatic mail, the sender check, the thread, the words) and hands what it
 * read to the core, which decides and records the verdict and the answer
 * (api/mailRequests/handleMailRequest.ts). The sender check, which waits on DNS, runs under
 * the message's lease, outside any transaction and within a deadline: a message whose check
 * runs out of time is tried again later (given up as `auth_timeout`) while the others go on.
 */

/** Beyond the sender check's deadline, for reading the message before it. */
const LEASE_MARGIN_SECONDS = 10;

/** Acts on the next waiting message; false when none waits. */
export async function processNextInbound(context: MailContext): Promise<boolean> {
  const { core } = context;
  const { mail: settings } = context.config;
  // The lease outlasts the sender check (bounded by its deadline) and the parse before it. No
  // longer: a processor that dies mid-check leaves the message to the next one only when the
  // lease runs out (a margin of 60 s held a crashed message 80 s).
  const leaseSeconds = Math.ceil(settings.authDeadlineMs / 1000) + LEASE_MARGIN_SECONDS;
  const message = await core.mail.leaseNextInbound(leaseSeconds);
  if (!message) return false;
  try {
    const mail = await readInbound(message.raw, message.truncated);
    // Outside any transaction: this waits on DNS, bounded by MAIL_AUTH_DEADLINE_MS.
    const sender = await checkSender(context, message, mail);
    if (sender && !sender.pass && sender.temporary) {
      const gaveUp = await core.mail.failInbound(message.messageId, sender.why, "auth_timeout");
      context.logger.warn(
        { message_id: message.messageId, why: sender.why, gave_up: gaveUp },
        "sender check ran out of time; the message waits for another try",
      );
      return true;
    }
    await core.mail.handleRequest(mailRequest(context, message, mail, sender));
    return true;
  } catch (error) {
    const gaveUp = await core.mail.failInbound(
      message.messageId,
      (error as Error).message ?? String(error),
    );
    context.logger.error(
      { err: error, message_id: message.messageId, gave_up: gaveUp },
      "mail failed",
    );
    return true;
  }
}

/** The message as the core decides on it: what reading it found, in mail's own terms. */
function mailRequest(
  context: MailContext,
  message: StoredInbound,
  mail: InboundMail,
  sender: SenderVerdict | null,
): MailRequest {
  const { domain, requireAuth } = context.config.mail;
  const log = (fields: Record<string, unknown>, words: string) =>
    context.logger.info({ message_id: message.messageId, ...fields }, words);
  const sign = automaticSign({ ...mail, envelopeFrom: message.envelopeFrom });
  let notAnswered: MailRequest["notAnswered"] = null;
  if (mail.headersTooLarge) {
    notAnswered = { status: "rejected", reason: "headers_too_large" };
  } else if (mail.headerTrick) {
    log(
      { trick: mail.headerTrick },
      "header block read differently by mail programs, not answered",
    );
    notAnswered = { status: "rejected", reason: "header_trick" };
  } else if (sign) {
    log({ sign }, "automatic mail, not answered");
    notAnswered = { status: "ignored", reason: "automatic" };
  }
  const ownMessage =
    isOwnMessageIdFormat(message.messageId, domain) ||
    (mail.from !== null && isOwnMailAddress(context, mail.from));
  let unauthenticated: MailRequest["unauthenticated"] = null;
  if (requireAuth && !sender?.pass && !notAnswered && !ownMessage && mail.from) {
    log({ why: sender?.why ?? "not checked" }, "sender not authenticated");
    unauthenticated = sender?.reason ?? "unauthenticated";
  }
  return {
    messageId: message.messageId,
    receivedAt: message.receivedAt,
    truncated: message.truncated,
    headerBlock: headerBlock(message.raw).bytes,
    from: mail.from,
    subject: mail.subject || null,
    notAnswered,
    ownMessage,
    unauthenticated,
    unreadable: mail.unreadable,
    threadClaimId: claimInThread(mail, domain),
    asks: readRequest(mail),
  };
}

/**
 * The sender check (MAIL_REQUIRE_AUTH) of a message that may be answered; null when no answer
 * can follow anyway (no single sender, huge or tricky headers, automatic mail) or the check
 * is off.
 */
async function checkSender(
  context: MailContext,
  message: StoredInbound,
  mail: InboundMail,
): Promise<SenderVerdict | null> {
  const { mail: settings } = context.config;
  if (!settings.requireAuth || !mail.from || mail.headersTooLarge || mail.headerTrick) return null;
  if (automaticSign({ ...mail, envelopeFrom: message.envelopeFrom })) return null;
  return authenticateSender(message.raw, mail.from, {
    ip: message.clientIp,
    helo: message.clientHelo,
    envelopeFrom: message.envelopeFrom,
    // The top Received header is the mailbox provider's on IMAP; on SMTP it is believed only
    // from a configured relay (anyone else can write one naming any address).
    trustReceived:
      message.transport === "imap" ||
      (settings.trustReceived && isTrustedRelay(settings.trustedRelays, message.clientIp)),
    mta: hostname(),
    resolver: context.dnsResolver,
    limits: {
      maxSignatures: settings.dkimMaxSignatures,
      deadlineMs: settings.authDeadlineMs,
      lookupTimeoutMs: settings.dnsTimeoutMs,
    },
  });
}
