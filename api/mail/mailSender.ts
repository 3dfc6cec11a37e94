import nodemailer, { type Transporter } from "nodemailer";
import type { MailConfig } from "../config/mailSettings.ts";
import { crashIfConfigured } from "../crashHook.ts";
import type { Delivery } from "../mailbox/deliverNextMail.ts";
import type { QueuedMail } from "../mailbox/outbox.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { composeMail } from "./composeMail.ts";
import type { MailContext } from "./mailContext.ts";

/**
 * The outbox's sender: the core hands it one due mail at a time, its row locked, and records
 * what became of it (attempts, backoff, `failed`: api/mailbox/deliverNextMail.ts); this writes
 * the mail and hands it to the SMTP server (SMTP_URL, DKIM-signed when a key is configured).
 */

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
  const { config, core } = context;
  const transport = createMailTransport(config.mail);

  async function send(mail: QueuedMail): Promise<Delivery> {
    const composed = await composeMail(context, mail);
    if (!composed) return { type: "nothing_to_send" };
    crashIfConfigured(config, "before_mail_sent");
    try {
      await transport.sendMail(composed.options);
    } catch (error) {
      return {
        type: "failed",
        error: describe(error),
        cause: error,
        permanent: isPermanent(error),
      };
    }
    return { type: "sent", messageId: composed.messageId };
  }

  return {
    name: "mail_sender",
    lockKey: LOCK_KEYS.mailSender,
    intervalMs: config.mail.sendIntervalMs,
    wakeChannels: [WAKE_CHANNELS.mailSender],
    async tick() {
      if (await core.mail.deliverNext(send)) return true;
      const dueIn = await core.mail.nextDueInMs();
      return dueIn === null ? false : Math.max(10, Math.min(dueIn, config.mail.sendIntervalMs));
    },
  };
}
