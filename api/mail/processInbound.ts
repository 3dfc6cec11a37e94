import { hostname } from "node:os";
import { isTrustedRelay } from "../config/mailSettings.ts";
import { crashIfConfigured } from "../crashHook.ts";
import type { Sql } from "../db/connect.ts";
import {
  claimMailAddress,
  delayInbound,
  findUnrecordedMailClaim,
  finishInbound,
  type InboundVerdict,
  leaseNextInbound,
  lockInbound,
  recordInboundFailure,
  type StoredInbound,
} from "../mailbox/inboundMessages.ts";
import { isOwnMessageId, queueMail, repliesInLastHour } from "../mailbox/outbox.ts";
import type { MailReason } from "../reasons/reasonCatalog.ts";
import { describeRefusal, type Refusal } from "../reasons/refusal.ts";
import {
  authenticateSender,
  organizationalDomain,
  type SenderVerdict,
} from "./authenticateSender.ts";
import { automaticSign } from "./automaticMail.ts";
import { isOwnMailAddress, type MailContext, serviceAddresses } from "./mailContext.ts";
import { claimInThread, isOwnMessageIdFormat } from "./messageIds.ts";
import { headerBlock } from "./rawHeaders.ts";
import { type InboundMail, readInbound } from "./readInbound.ts";
import { readRequest } from "./readRequest.ts";
import type { ReplyPayload } from "./replyPayload.ts";

/**
 * The mail processor: acts on stored messages one at a time, oldest first. Each message gets
 * a verdict (processed, ignored, rejected) and at most one answer, both written in one
 * transaction with the message row locked. The sender check, which waits on DNS, runs before
 * that transaction under the message's lease, within a deadline: a message whose check runs
 * out of time is tried again later (given up as `auth_timeout`) while the others go on. A claim is created through the same use-case as
 * POST /api/claims, a tx hash attached through the same as POST /api/claims/{id}/tx.
 */

const MAX_ATTEMPTS = 5;
/** Beyond the sender check's deadline, for reading the message before it. */
const LEASE_MARGIN_SECONDS = 10;

type Answer =
  | { kind: "mail_instructions"; claimId: string }
  | { kind: "mail_reply"; claimId: string | null; payload: ReplyPayload };

type Decision =
  | { verdict: InboundVerdict; answer: Answer | null; delay?: undefined }
  /** A reply budget is spent: the message waits (not answered yet, not dropped). */
  | { delay: { seconds: number; why: string } };

/** Acts on the next waiting message; false when none waits. */
export async function processNextInbound(context: MailContext): Promise<boolean> {
  const { mail: settings } = context.config;
  // The lease outlasts the sender check (bounded by its deadline) and the parse before it. No
  // longer: a processor that dies mid-check leaves the message to the next one only when the
  // lease runs out (a margin of 60 s held a crashed message 80 s).
  const leaseSeconds = Math.ceil(settings.authDeadlineMs / 1000) + LEASE_MARGIN_SECONDS;
  const message = await leaseNextInbound(context.sql, leaseSeconds);
  if (!message) return false;
  try {
    const mail = await readInbound(message.raw, message.truncated);
    // Outside any transaction: this waits on DNS, bounded by MAIL_AUTH_DEADLINE_MS.
    const sender = await checkSender(context, message, mail);
    if (sender && !sender.pass && sender.temporary) {
      const gaveUp = await recordInboundFailure(
        context.sql,
        message.messageId,
        sender.why,
        MAX_ATTEMPTS,
        "auth_timeout",
      );
      context.logger.warn(
        { message_id: message.messageId, why: sender.why, gave_up: gaveUp },
        "sender check ran out of time; the message waits for another try",
      );
      return true;
    }
    await context.sql.begin(async (transaction) => {
      if (!(await lockInbound(transaction, message.messageId))) return;
      const decision = await decide(context, transaction, message, mail, sender);
      if (decision.delay) {
        await delayInbound(transaction, message.messageId, decision.delay);
        context.logger.info(
          { message_id: message.messageId, ...decision.delay },
          "reply budget spent; the message waits",
        );
        return;
      }
      await finishInbound(
        transaction,
        message.messageId,
        decision.verdict,
        headerBlock(message.raw).bytes,
      );
      if (decision.answer) await queueAnswer(transaction, message, decision);
      context.logger.info(
        {
          message_id: message.messageId,
          status: decision.verdict.status,
          outcome: decision.verdict.outcome,
          claim_id: decision.verdict.claimId,
        },
        "mail acted on",
      );
    });
    return true;
  } catch (error) {
    const gaveUp = await recordInboundFailure(
      context.sql,
      message.messageId,
      (error as Error).message ?? String(error),
      MAX_ATTEMPTS,
    );
    context.logger.error(
      { err: error, message_id: message.messageId, gave_up: gaveUp },
      "mail failed",
    );
    return true;
  }
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

async function queueAnswer(
  transaction: Sql,
  message: StoredInbound,
  decision: { verdict: InboundVerdict; answer: Answer | null },
) {
  const { answer, verdict } = decision;
  if (!answer || !verdict.fromAddress) return;
  await queueMail(transaction, {
    kind: answer.kind,
    claimId: answer.claimId,
    recipient: verdict.fromAddress,
    inReplyTo: message.messageId,
    payload: answer.kind === "mail_reply" ? answer.payload : {},
    idempotencyKey:
      answer.kind === "mail_instructions"
        ? `mail_instructions:${answer.claimId}`
        : `mail_reply:${message.messageId}`,
  });
}

async function decide(
  context: MailContext,
  transaction: Sql,
  message: StoredInbound,
  mail: InboundMail,
  sender: SenderVerdict | null,
): Promise<Decision> {
  const base = { fromAddress: mail.from, subject: mail.subject || null, claimId: null };
  const unanswered = (status: "ignored" | "rejected", reason: MailReason): Decision => ({
    verdict: { ...base, status, outcome: reason },
    answer: null,
  });
  const help = (reason: MailReason, found?: string[]): Decision => ({
    verdict: { ...base, status: "processed", outcome: reason },
    answer: { kind: "mail_reply", claimId: null, payload: { type: "help", reason, found } },
  });

  if (mail.headersTooLarge) return unanswered("rejected", "headers_too_large");
  if (mail.headerTrick) {
    context.logger.info(
      { message_id: message.messageId, trick: mail.headerTrick },
      "header block read differently by mail programs, not answered",
    );
    return unanswered("rejected", "header_trick");
  }
  const sign = automaticSign({ ...mail, envelopeFrom: message.envelopeFrom });
  if (sign) {
    context.logger.info({ message_id: message.messageId, sign }, "automatic mail, not answered");
    return unanswered("ignored", "automatic");
  }
  if (
    isOwnMessageIdFormat(message.messageId, context.config.mail.domain) ||
    (await isOwnMessageId(transaction, message.messageId)) ||
    (mail.from !== null && isOwnMailAddress(context, mail.from))
  ) {
    return unanswered("ignored", "own_message");
  }
  if (!mail.from) return unanswered("rejected", "no_sender");
  const from = mail.from;

  if (context.config.mail.requireAuth) {
    if (!sender?.pass) {
      context.logger.info(
        { message_id: message.messageId, why: sender?.why ?? "not checked" },
        "sender not authenticated",
      );
      return unanswered("rejected", sender?.reason ?? "unauthenticated");
    }
  }
  // No answer later than MAIL_REPLY_MAX_DELAY_HOURS after the message came, whatever held it
  // (a budget, a backlog, a service that was down): the sender has given up or written again.
  const waited = Date.now() - message.receivedAt.getTime();
  if (waited > context.config.mail.replyMaxDelayMs) return unanswered("rejected", "too_late");
  const spent = await spentReplyBudget(context, transaction, from);
  if (spent) {
    if (waited + spent.seconds * 1000 > context.config.mail.replyMaxDelayMs) {
      return unanswered("rejected", "rate_limited");
    }
    return { delay: spent };
  }
  if (message.truncated) return help("too_large");
  if (mail.unreadable) return help("unreadable");

  const threadClaim = claimInThread(mail, context.config.mail.domain);
  if (threadClaim) {
    const owner = await claimMailAddress(transaction, threadClaim);
    // Only the claim's own address speaks in its thread; anyone else starts afresh.
    if (owner && owner.toLowerCase() === from.toLowerCase()) {
      return answerInThread(context, mail, threadClaim, base);
    }
  }
  return newClaim(context, transaction, message, mail, from, base, help);
}

/**
 * The reply budget this sender would exceed (per address, per organizational domain, overall;
 * MAIL_REPLIES_PER_*), with the time until a reply leaves its hour; null when there is room.
 * Per domain, so one domain passing DMARC cannot use up the replies for everyone else.
 */
async function spentReplyBudget(
  context: MailContext,
  sql: Sql,
  from: string,
): Promise<{ seconds: number; why: string } | null> {
  const { mail: settings } = context.config;
  const domain = from.slice(from.lastIndexOf("@") + 1).toLowerCase();
  const organization = organizationalDomain(domain) ?? domain;
  const use = await repliesInLastHour(sql, from, organization);
  const budgets = [
    { name: "per address", used: use.toRecipient, limit: settings.repliesPerSenderPerHour },
    {
      name: `per domain (${organization})`,
      used: use.toDomain,
      limit: settings.repliesPerDomainPerHour,
    },
    { name: "overall", used: use.overall, limit: settings.repliesPerHour },
  ].filter((budget) => budget.used.count >= budget.limit);
  if (budgets.length === 0) return null;
  const seconds = Math.max(1, ...budgets.map((budget) => budget.used.freesInSeconds));
  return {
    seconds,
    why: `replies ${budgets.map((budget) => `${budget.name} ${budget.used.count}/${budget.limit}`).join(", ")} in the last hour`,
  };
}

/** A reply in a claim's thread: a tx hash is attached to that claim; else its status. */
async function answerInThread(
  context: MailContext,
  mail: InboundMail,
  claimId: string,
  base: Omit<InboundVerdict, "status" | "outcome">,
): Promise<Decision> {
  const found = await context.core.getClaim(claimId);
  if (found.type !== "claim") throw new Error(`the claim ${claimId} of a thread vanished`);
  const claim = found.claim;
  const known = [claim.txHash, claim.payment?.txHash, claim.payoutTx].filter(
    (hash): hash is string => hash !== null && hash !== undefined,
  );
  const request = readRequest(mail, {
    addresses: [...serviceAddresses(context), claim.payoutAddress],
    txHashes: known,
  });
  const reply = (outcome: string, payload: ReplyPayload): Decision => ({
    verdict: { ...base, claimId, status: "processed", outcome },
    answer: { kind: "mail_reply", claimId, payload },
  });
  if (request.txHashes.length > 1) {
    return reply("two_tx_hashes", {
      type: "help",
      reason: "two_tx_hashes",
      found: request.txHashes,
    });
  }
  const [txHash] = request.txHashes;
  if (!txHash) {
    return reply("status_sent", {
      type: "status",
      ...(request.addresses.length > 0 ? { note: "payout_address_fixed" as const } : {}),
    });
  }
  const result = await context.core.attachTx(claimId, { tx_hash: txHash });
  if (result.type === "attached") {
    return reply("tx_attached", { type: "attached", state: result.state, txHash: result.txHash });
  }
  return reply("tx_refused", refusalPayload(result));
}

/** A first message: one payout address (and maybe a tx hash) makes one claim, flow `mail`. */
async function newClaim(
  context: MailContext,
  transaction: Sql,
  message: StoredInbound,
  mail: InboundMail,
  from: string,
  base: Omit<InboundVerdict, "status" | "outcome">,
  help: (reason: MailReason, found?: string[]) => Decision,
): Promise<Decision> {
  const request = readRequest(mail, { addresses: serviceAddresses(context) });
  if (request.addresses.length === 0) return help("no_address");
  if (request.addresses.length > 1) return help("two_addresses", request.addresses);
  if (request.txHashes.length > 1) return help("two_tx_hashes", request.txHashes);
  const [payoutAddress] = request.addresses as [string];
  const [txHash] = request.txHashes;

  const created = (claimId: string): Decision => ({
    verdict: { ...base, claimId, status: "processed", outcome: "claim_created" },
    answer: { kind: "mail_instructions", claimId },
  });
  // A crash between creating the claim and recording it left the claim behind: take it.
  const unrecorded = await findUnrecordedMailClaim(transaction, {
    email: from,
    payoutAddress,
    since: message.receivedAt,
  });
  if (unrecorded) return created(unrecorded);

  const result = await context.core.createClaim(
    {
      payout_address: payoutAddress,
      email: from,
      ...(txHash ? { tx_hash: txHash } : {}),
      ...(request.agentName !== null ? { agent_name: request.agentName } : {}),
    },
    { flow: "mail", client: `mail:${from.toLowerCase()}` },
  );
  if (result.type === "created") {
    crashIfConfigured(context.config, "after_mail_claim_created");
    return created(result.claim.id);
  }
  return {
    verdict: { ...base, status: "processed", outcome: "claim_refused" },
    answer: { kind: "mail_reply", claimId: null, payload: refusalPayload(result) },
  };
}

function refusalPayload(refusal: Refusal): ReplyPayload {
  const { code, title, detail, fields } = describeRefusal(refusal);
  return { type: "refusal", refusal: { code, title, detail, fields } };
}
