import { ImapFlow } from "imapflow";
import { acceptInbound } from "./acceptInbound.ts";
import { intakeErrorReason } from "./intakeErrorReason.ts";
import type { MailContext } from "./mailContext.ts";

/**
 * The IMAP intake (MAIL_INTAKE=imap), for a hosted mailbox: takes every unseen message, stores
 * it, and only then flags it \Seen, so a crash in between leaves it unseen and it is taken
 * again (the store is keyed by Message-ID: a redelivery is the same row). Any number of
 * replicas may poll the same mailbox. New mail is noticed at once where the server offers
 * IDLE, and at the latest every IMAP_POLL_SECONDS; a lost connection is reopened with backoff.
 */

export interface RunningImapIntake {
  stop(): Promise<void>;
}

export function startImapIntake(context: MailContext): RunningImapIntake {
  const { config, logger, core } = context;
  const imap = config.mail.imap;
  if (!imap) throw new Error("MAIL_INTAKE=imap without IMAP settings");
  const log = logger.child({ part: "imap_intake" });
  let stopping = false;
  let client: ImapFlow | undefined;
  let wake: (() => void) | undefined;
  let nudged = false;
  const nudge = () => {
    nudged = true;
    wake?.();
  };
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (nudged || stopping) return resolve();
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = undefined;
      nudged = false;
    });

  async function takeUnseen(connection: ImapFlow): Promise<number> {
    const uids = (await connection.search({ seen: false }, { uid: true })) || [];
    for (const uid of uids) {
      const range = String(uid);
      const meta = await connection.fetchOne(range, { size: true }, { uid: true });
      if (!meta) continue;
      const size = meta.size ?? 0;
      const message =
        size > config.mail.maxBytes
          ? await connection.fetchOne(range, { headers: true }, { uid: true })
          : await connection.fetchOne(range, { source: true }, { uid: true });
      if (!message) continue;
      const raw = size > config.mail.maxBytes ? message.headers : message.source;
      if (!raw) continue;
      await acceptInbound(context, { transport: "imap", raw, sizeBytes: size });
      // Flagged only once stored: a crash before this line means it is taken again.
      await connection.messageFlagsAdd(range, ["\\Seen"], { uid: true });
    }
    return uids.length;
  }

  const done = (async () => {
    let failures = 0;
    while (!stopping) {
      const connection = new ImapFlow({
        host: imap.host,
        port: imap.port,
        secure: imap.secure,
        auth: { user: imap.user, pass: imap.password },
        logger: false,
        autoIdleDelay: 1_000,
        connectionTimeout: 15_000,
        greetingTimeout: 15_000,
      });
      client = connection;
      connection.on("exists", nudge);
      connection.on("close", nudge);
      connection.on("error", (error: unknown) => log.warn({ err: error }, "IMAP connection error"));
      try {
        await connection.connect();
        await connection.mailboxOpen(imap.mailbox);
        log.info({ host: imap.host, mailbox: imap.mailbox }, "IMAP intake connected");
        while (!stopping && connection.usable) {
          const taken = await takeUnseen(connection);
          await core.mail.intakeAlive("imap");
          failures = 0;
          if (taken === 0) await pause(imap.pollMs);
        }
        if (!stopping) throw new Error("the IMAP server closed the connection");
      } catch (error) {
        if (stopping) break;
        failures += 1;
        log.warn({ err: error, failures }, "IMAP poll failed; reconnecting");
        // Health shows a reason code; the server's words (hosts, accounts) stay in the log.
        await core.mail.intakeError("imap", intakeErrorReason(error)).catch(() => {});
        await pause(Math.min(30_000, 500 * 2 ** failures));
      } finally {
        connection.removeAllListeners("exists");
        await connection.logout().catch(() => connection.close());
      }
    }
  })();

  return {
    async stop() {
      stopping = true;
      wake?.();
      client?.close();
      await done;
    },
  };
}
