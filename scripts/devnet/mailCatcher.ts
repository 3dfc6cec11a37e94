import { mkdir, rename, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { SMTPServer, type SMTPServerSession } from "smtp-server";

/**
 * A real SMTP server that takes every message and hands it over instead of delivering it: the
 * devnet's outbound mail server (every message as an .eml file under `.devnet/mail/`) and the
 * tests' (`test/support/mailCatcher.ts`). `refuse` makes it answer a status of the test's
 * choosing to every recipient.
 */

export interface CaughtEnvelope {
  mailFrom: string | null;
  rcptTo: string[];
}

export interface MailCatcher {
  host: string;
  port: number;
  /** smtp://host:port, for SMTP_URL. */
  url: string;
  /** From now on every RCPT TO is answered with this (e.g. 550), or accepted again (null). */
  refuse(code: number | null): void;
  stop(): Promise<void>;
}

export async function startMailCatcher(options: {
  port?: number;
  host?: string;
  onMessage: (raw: Buffer, envelope: CaughtEnvelope) => void | Promise<void>;
}): Promise<MailCatcher> {
  const host = options.host ?? "127.0.0.1";
  let refusal: number | null = null;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["AUTH", "STARTTLS"],
    logger: false,
    onRcptTo(_address, _session, callback) {
      if (refusal === null) return callback();
      callback(Object.assign(new Error("Refused by the catcher"), { responseCode: refusal }));
    },
    onData(stream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.once("error", (error) => callback(error));
      stream.once("end", () => {
        const mailFrom = session.envelope.mailFrom;
        Promise.resolve(
          options.onMessage(Buffer.concat(chunks), {
            mailFrom: mailFrom === false ? null : mailFrom.address,
            rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
          }),
        ).then(
          () => callback(),
          (error: Error) => callback(error),
        );
      });
    },
  });
  // A connection that breaks mid-message (its sender killed, say) is reported here; without a
  // listener, smtp-server's 'error' event is thrown and takes the whole process down (the
  // devnet's, or a test run's). The message was never acknowledged: its sender sends it again.
  server.on("error", () => {});
  const port = await new Promise<number>((resolve, reject) => {
    server.server.once("error", reject);
    server.listen(options.port ?? 0, host, () =>
      resolve((server.server.address() as AddressInfo).port),
    );
  });
  return {
    host,
    port,
    url: `smtp://${host}:${port}`,
    refuse(code) {
      refusal = code;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The devnet's catcher: every outgoing message as `<time>-<n>.eml` in `directory`. */
export async function startDevnetMailCatcher(directory: string): Promise<MailCatcher> {
  await mkdir(directory, { recursive: true });
  let count = 0;
  return startMailCatcher({
    onMessage: async (raw) => {
      count += 1;
      const name = `${new Date().toISOString().replaceAll(":", "-")}-${count}.eml`;
      // Written under another name, then renamed: a reader never sees a half-written .eml.
      await writeFile(join(directory, `.${name}.partial`), raw);
      await rename(join(directory, `.${name}.partial`), join(directory, name));
    },
  });
}
