import nodemailer, { type Transporter } from "nodemailer";
import type { MailConfig } from "../config/mailSettings.ts";
import { crashIfConfigured } from "../crashHook.ts";
import {
  markMailAttemptFailed,
  markMailSent,
  nextMailDueInMs,
  type QueuedMail,
  takeDueMail,
} from "../mailbox/outbox.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { composeMail } from "./composeMail.ts";
import type { MailContext } from "./mailContext.ts";

/**
 * The outbox's sender: one mail at a time, its row locked (`for update skip locked`) while it
 * is handed to the SMTP server (SMTP_URL, DKIM-signed when a key is configured), then marked
 * sent in the same transaction. A failure is data: the attempt is counted, the mail is tried
 * again after a doubling backoff, and after MAIL_MAX_ATTEMPTS (or at once when the server
 * refuses the recipient for good) it is `failed` with the last error. Only a crash between
 * the server's "250 OK" and the commit can send a mail twice, and then with the same
 * Message-ID.
 */

const MAX_BACKOFF_MS = 6 * 3600 * 1000;

export function createMailTransport(mail: MailConfig): Transporter {
  return nodemailer.createTransport({
    url: mail.smtpUrl,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
    ...(mail.dkim ? { dkim: mail.dkim } : {}),
  });
}

/** A 5xx about the mail or its recipient will never pass; a 5xx about our login or a 4xx may. */
function isPermanent(error: unknown): boolean {
  const { responseCode, command } = error as { responseCode?: number; command?: string };
  return (
    typeof responseCode === "number" &&
    responseCode >= 500 &&
    responseCode < 600 &&
    !/^(AUTH|CONN|EHLO|HELO|STARTTLS|GREETING)/i.test(command ?? "")
  );
}

function describe(error: unknown): string {
  const { message, response } = error as { message?: string; response?: string };
  return (response ?? message ?? String(error)).replace(/\s+/g, " ").slice(0, 500);
}

export function createMailSender(context: MailContext): Worker {
  const { config, logger } = context;
  const transport = createMailTransport(config.mail);
  const log = logger.child({ worker: "mail_sender" });

  async function sendOne(mail: QueuedMail, transaction: Parameters<typeof markMailSent>[0]) {
    const retryIn = (): number | null =>
      mail.attempts + 1 >= config.mail.maxAttempts
        ? null
        : Math.min(MAX_BACKOFF_MS, config.mail.retryBaseMs * 2 ** mail.attempts);
    // An answer is never sent later than MAIL_REPLY_MAX_DELAY_HOURS after the message it
    // answers came (the SMTP server was down that long): failed for good, with the reason.
    if (mail.kind !== "receipt_mail" && mail.answersReceivedAt) {
      const waitedMs = Date.now() - mail.answersReceivedAt.getTime();
      if (waitedMs > config.mail.replyMaxDelayMs) {
        const hours = Math.floor(waitedMs / 3_600_000);
        log.warn(
          { outbox_id: String(mail.id), kind: mail.kind, waited_hours: hours },
          "answer too late, not sent",
        );
        await markMailAttemptFailed(transaction, mail.id, {
          error: `too late: the message it answers came ${hours} h ago, over MAIL_REPLY_MAX_DELAY_HOURS`,
          retryInMs: null,
        });
        return;
      }
    }
    const composed = await composeMail(context, mail);
    if (!composed) {
      await markMailAttemptFailed(transaction, mail.id, {
        error: "nothing to send: the claim or its receipt is not there",
        retryInMs: retryIn(),
      });
      return;
    }
    crashIfConfigured(config, "before_mail_sent");
    try {
      await transport.sendMail(composed.options);
    } catch (error) {
      const retryInMs = isPermanent(error) ? null : retryIn();
      log.warn(
        { err: error, outbox_id: String(mail.id), kind: mail.kind, retry_in_ms: retryInMs },
        retryInMs === null ? "mail failed for good" : "mail not sent; will retry",
      );
      await markMailAttemptFailed(transaction, mail.id, { error: describe(error), retryInMs });
      return;
    }
    await markMailSent(transaction, mail.id, composed.messageId);
    log.info(
      { outbox_id: String(mail.id), kind: mail.kind, message_id: composed.messageId },
      "mail sent",
    );
  }

  return {
    name: "mail_sender",
    lockKey: LOCK_KEYS.mailSender,
    intervalMs: config.mail.sendIntervalMs,
    wakeChannel: WAKE_CHANNELS.mailSender,
    async tick() {
      const worked = await context.sql.begin(async (transaction) => {
        const mail = await takeDueMail(transaction);
        if (!mail) return false;
        await sendOne(mail, transaction);
        return true;
      });
      if (worked) return true;
      const dueIn = await nextMailDueInMs(context.sql);
      return dueIn === null ? false : Math.max(10, Math.min(dueIn, config.mail.sendIntervalMs));
    },
  };
}
