import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { startImapIntake } from "./imapIntake.ts";
import type { MailContext } from "./mailContext.ts";
import { createMailSender } from "./mailSender.ts";
import { processNextInbound } from "./processInbound.ts";
import { startSmtpIntake } from "./smtpIntake.ts";

/**
 * The mail surface of one service process. Where surfaces run (ROLE api or all): the intake,
 * an SMTP listener or an IMAP poller (MAIL_INTAKE). Where workers run (worker or all): the
 * processor that acts on stored messages (when an intake is configured) and the outbox's sender
 * (when SMTP_URL is set; it also sends the receipt mails of the claim and x402 flows). Each
 * worker runs on one replica at a time (advisory locks).
 */
export interface RunningMail {
  workers: Worker[];
  /** Where the SMTP intake listens, when this process runs it. */
  smtpIntake: { host: string; port: number } | null;
  stop(): Promise<void>;
}

/** How often an idle mail processor deletes messages older than MAIL_RETENTION_DAYS. */
const PRUNE_EVERY_MS = 10 * 60_000;

export function createMailProcessor(context: MailContext): Worker {
  let prunedAt = 0;
  return {
    name: "mail_processor",
    lockKey: LOCK_KEYS.mailProcessor,
    intervalMs: 1_000,
    wakeChannels: [WAKE_CHANNELS.mailProcessor],
    async tick() {
      if (await processNextInbound(context)) return true;
      if (Date.now() - prunedAt >= PRUNE_EVERY_MS) {
        prunedAt = Date.now();
        const deleted = await context.core.mail.pruneInbound();
        if (deleted > 0) {
          context.logger.info({ deleted }, "old mail messages deleted (MAIL_RETENTION_DAYS)");
        }
        // A full batch: more may be waiting.
        if (deleted >= 1_000) prunedAt = 0;
      }
      return false;
    },
  };
}

export async function startMail(context: MailContext): Promise<RunningMail> {
  const { config } = context;
  const mail = config.mail;
  const workers: Worker[] = [];
  if (config.role !== "api") {
    if (mail.intake !== "off") workers.push(createMailProcessor(context));
    if (mail.smtpUrl) workers.push(createMailSender(context));
  }
  if (config.role === "worker" || mail.intake === "off") {
    return { workers, smtpIntake: null, stop: async () => {} };
  }
  if (mail.intake === "smtp") {
    const intake = await startSmtpIntake(context);
    return {
      workers,
      smtpIntake: { host: intake.host, port: intake.port },
      stop: () => intake.stop(),
    };
  }
  const intake = startImapIntake(context);
  return { workers, smtpIntake: null, stop: () => intake.stop() };
}
