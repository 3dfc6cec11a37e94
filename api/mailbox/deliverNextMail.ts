import type { MailConfig } from "../config/mailSettings.ts";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { markMailAttemptFailed, markMailSent, type QueuedMail, takeDueMail } from "./outbox.ts";

/**
 * The outbox's delivery, one mail at a time: its row locked (`for update skip locked`) while
 * the mail surface hands it to the SMTP server (api/mail/mailSender.ts), then marked sent in
 * the same transaction. A failure is data: the attempt is counted, the mail is tried again
 * after a doubling backoff, and after MAIL_MAX_ATTEMPTS (or at once when the server refuses
 * the recipient for good) it is `failed` with the last error. Only a crash between the
 * server's "250 OK" and the commit can send a mail twice, and then with the same Message-ID.
 */

const MAX_BACKOFF_MS = 6 * 3600 * 1000;

/** What became of a mail handed to the mail surface. */
export type Delivery =
  | { type: "sent"; messageId: string }
  /** Nothing to send (the claim or its receipt is not there): tried again later. */
  | { type: "nothing_to_send" }
  /** The SMTP server did not take it; `permanent` when it never will. */
  | { type: "failed"; error: string; cause: unknown; permanent: boolean };

export interface DeliveryDeps {
  sql: Database;
  mail: MailConfig;
  logger: Logger;
}

/** Hands the next due mail to `deliver` and records what became of it; false when none is due. */
export async function deliverNextMail(
  deps: DeliveryDeps,
  deliver: (mail: QueuedMail) => Promise<Delivery>,
): Promise<boolean> {
  return deps.sql.begin(async (transaction) => {
    const mail = await takeDueMail(transaction);
    if (!mail) return false;
    const { mail: settings, logger } = deps;
    const retryIn = (): number | null =>
      mail.attempts + 1 >= settings.maxAttempts
        ? null
        : Math.min(MAX_BACKOFF_MS, settings.retryBaseMs * 2 ** mail.attempts);
    // An answer is never sent later than MAIL_REPLY_MAX_DELAY_HOURS after the message it
    // answers came (the SMTP server was down that long): failed for good, with the reason.
    if (mail.kind !== "receipt_mail" && mail.answersReceivedAt) {
      const waitedMs = Date.now() - mail.answersReceivedAt.getTime();
      if (waitedMs > settings.replyMaxDelayMs) {
        const hours = Math.floor(waitedMs / 3_600_000);
        logger.warn(
          { outbox_id: String(mail.id), kind: mail.kind, waited_hours: hours },
          "answer too late, not sent",
        );
        await markMailAttemptFailed(transaction, mail.id, {
          error: `too late: the message it answers came ${hours} h ago, over MAIL_REPLY_MAX_DELAY_HOURS`,
          retryInMs: null,
        });
        return true;
      }
    }
    const delivery = await deliver(mail);
    switch (delivery.type) {
      case "nothing_to_send":
        await markMailAttemptFailed(transaction, mail.id, {
          error: "nothing to send: the claim or its receipt is not there",
          retryInMs: retryIn(),
        });
        break;
      case "failed": {
        const retryInMs = delivery.permanent ? null : retryIn();
        logger.warn(
          {
            err: delivery.cause,
            outbox_id: String(mail.id),
            kind: mail.kind,
            retry_in_ms: retryInMs,
          },
          retryInMs === null ? "mail failed for good" : "mail not sent; will retry",
        );
        await markMailAttemptFailed(transaction, mail.id, { error: delivery.error, retryInMs });
        break;
      }
      case "sent":
        await markMailSent(transaction, mail.id, delivery.messageId);
        logger.info(
          { outbox_id: String(mail.id), kind: mail.kind, message_id: delivery.messageId },
          "mail sent",
        );
    }
    return true;
  });
}
