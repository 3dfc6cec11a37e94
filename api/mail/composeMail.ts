import type { SendMailOptions } from "nodemailer";
import { type ClaimView, claimView } from "../claims/claimView.ts";
import type { ClaimDetails } from "../claims/readClaim.ts";
import type { QueuedMail } from "../mailbox/outbox.ts";
import type { ReplyPayload } from "../mailRequests/replyPayload.ts";
import type { StoredReceipt } from "../receipts/readReceipt.ts";
import { receiptView } from "../receipts/receiptView.ts";
import type { MailContext } from "./mailContext.ts";
import { instructionsText, type MailSite, receiptText, replyText } from "./mailTexts.ts";
import { outboundMessageId } from "./messageIds.ts";
import { headerBlock, isMadeUpMessageId, readRawHeaders } from "./rawHeaders.ts";

/**
 * An outbox row as the mail to send, written when it is sent from the claim as it stands then
 * (so a receipt mail has the receipt, the instructions the claim's current state). Its
 * Message-ID is fixed by the row; an answer is threaded under the message it answers
 * (In-Reply-To, References, "Re:"), and so is the receipt of a mail claim.
 */
export interface ComposedMail {
  messageId: string;
  options: SendMailOptions;
}

interface Thread {
  subject: string;
  inReplyTo?: string;
  references: string[];
}

function replySubject(subject: string | null): string {
  const trimmed = (subject ?? "").replace(/[\r\n]+/g, " ").trim();
  if (!trimmed) return "Re: your message to pay-and-earn";
  return /^re:/i.test(trimmed) ? trimmed : `Re: ${trimmed}`;
}

async function threadUnder(
  context: MailContext,
  messageId: string,
  ours: string[] = [],
): Promise<Thread> {
  const head = await context.core.mail.inboundHead(messageId);
  const headers = head ? readRawHeaders(headerBlock(head.head).bytes) : new Map();
  const earlier = (headers.get("references") ?? []).flatMap(
    (value: string) => value.match(/<[^<>\s]+>/g) ?? [],
  );
  const own = isMadeUpMessageId(messageId) ? [] : [messageId];
  return {
    subject: replySubject(head?.subject ?? null),
    ...(own.length > 0 ? { inReplyTo: messageId } : {}),
    references: [...earlier.slice(-10), ...own, ...ours],
  };
}

function site(context: MailContext): MailSite {
  const { config } = context;
  return {
    service: config.serviceName,
    site: config.http.publicUrl,
    intakeAddress: config.mail.intakeAddress,
    confirmations: config.chain.confirmations,
  };
}

/** The claim of the mail, with its receipt for a receipt mail (null when either is gone). */
async function claimOf(
  context: MailContext,
  mail: QueuedMail,
): Promise<{ claim: ClaimView; receipt: StoredReceipt | null } | null> {
  if (!mail.claimId) return null;
  const view = (claim: ClaimDetails) => claimView(context.config, claim);
  if (mail.kind === "receipt_mail") {
    const found = await context.core.getClaimWithReceipt(mail.claimId);
    return found.type === "claim" ? { claim: view(found.claim), receipt: found.receipt } : null;
  }
  const found = await context.core.getClaim(mail.claimId);
  return found.type === "claim" ? { claim: view(found.claim), receipt: null } : null;
}

/** Null when there is nothing to send (the claim or its receipt is gone). */
export async function composeMail(
  context: MailContext,
  mail: QueuedMail,
): Promise<ComposedMail | null> {
  const { config } = context;
  const messageId = outboundMessageId(mail.id, mail.claimId, config.mail.domain);
  const found = await claimOf(context, mail);
  const claim = found?.claim ?? null;
  let thread: Thread;
  let text: string;
  let attachments: SendMailOptions["attachments"];
  let autoSubmitted = "auto-replied";

  switch (mail.kind) {
    case "mail_instructions": {
      if (!claim || !mail.inReplyTo) return null;
      thread = await threadUnder(context, mail.inReplyTo);
      text = instructionsText(site(context), claim);
      break;
    }
    case "mail_reply": {
      if (!mail.inReplyTo) return null;
      const ours = mail.claimId ? await context.core.mail.sentMessageIdsOfClaim(mail.claimId) : [];
      thread = await threadUnder(context, mail.inReplyTo, ours);
      text = replyText(site(context), mail.payload as ReplyPayload, claim);
      break;
    }
    case "receipt_mail": {
      if (!claim || !found?.receipt) return null;
      const receipt = receiptView(found.receipt, `${config.http.publicUrl}/api/receipts/verify`);
      const origin =
        claim.flow === "mail" ? await context.core.mail.originOfClaim(claim.claim_id) : null;
      thread = origin
        ? await threadUnder(
            context,
            origin.messageId,
            await context.core.mail.sentMessageIdsOfClaim(claim.claim_id),
          )
        : {
            subject: `Your ${config.serviceName} receipt for claim ${claim.claim_id}`,
            references: [],
          };
      autoSubmitted = origin ? "auto-replied" : "auto-generated";
      text = receiptText(site(context), claim, receipt);
      attachments = [
        {
          filename: "receipt.json",
          contentType: "application/json",
          content: `${JSON.stringify(
            {
              ...receipt,
              payout_tx: claim.payout_tx,
              payout_explorer_url: claim.payout_explorer_url,
              payout_address: claim.payout_address,
            },
            null,
            2,
          )}\n`,
        },
      ];
      break;
    }
  }

  return {
    messageId,
    options: {
      from: { name: config.serviceName, address: config.mail.from as string },
      to: mail.recipient,
      subject: thread.subject,
      text,
      messageId,
      ...(thread.inReplyTo ? { inReplyTo: thread.inReplyTo } : {}),
      ...(thread.references.length > 0 ? { references: thread.references } : {}),
      // RFC 3834: other robots must not answer ours.
      headers: { "Auto-Submitted": autoSubmitted },
      ...(attachments ? { attachments } : {}),
    },
  };
}
