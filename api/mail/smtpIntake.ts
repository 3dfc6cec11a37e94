import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import { recordIntakeAlive } from "../mailbox/mailStatus.ts";
import { acceptInbound } from "./acceptInbound.ts";
import type { MailContext } from "./mailContext.ts";

/**
 * The SMTP intake (MAIL_INTAKE=smtp), for a service that is its domain's MX or sits behind a
 * relay: accepts mail for the intake address only, keeps at most MAIL_MAX_BYTES of a message
 * (the rest is read and dropped; such a message gets one reply saying so), stores it, and
 * answers 250 only once it is stored, so a sending MTA retries whatever was not. A message
 * that declares or turns out over a hard cap is refused with 552 and never stored.
 */

export interface RunningSmtpIntake {
  host: string;
  port: number;
  stop(): Promise<void>;
}

function smtpError(message: string, responseCode: number): Error {
  return Object.assign(new Error(message), { responseCode });
}

export async function startSmtpIntake(context: MailContext): Promise<RunningSmtpIntake> {
  const { config, logger, sql } = context;
  const { smtpIntake, maxBytes, intakeAddress } = config.mail;
  const hardCap = Math.max(25 * 1024 * 1024, maxBytes * 4);
  const log = logger.child({ part: "smtp_intake" });

  const onData = (
    stream: SMTPServerDataStream,
    session: SMTPServerSession,
    callback: (error?: Error | null) => void,
  ) => {
    const kept: Buffer[] = [];
    let size = 0;
    stream.on("data", (chunk: Buffer) => {
      if (size < maxBytes) kept.push(chunk.subarray(0, maxBytes - size));
      size += chunk.length;
    });
    stream.once("error", (error) => callback(error));
    stream.once("end", () => {
      if (stream.sizeExceeded) {
        callback(smtpError(`Message too large: the limit is ${hardCap} bytes`, 552));
        return;
      }
      const mailFrom = session.envelope.mailFrom;
      acceptInbound(context, {
        transport: "smtp",
        raw: Buffer.concat(kept),
        sizeBytes: size,
        envelopeFrom: mailFrom === false ? null : mailFrom.address,
        clientIp: session.remoteAddress,
        clientHelo: session.hostNameAppearsAs,
      }).then(
        () => callback(),
        (error: unknown) => {
          log.error({ err: error }, "could not store a message; the sender will retry");
          callback(smtpError("Temporary failure, try again later", 451));
        },
      );
    });
  };

  const tls = smtpIntake.tls;
  const server = new SMTPServer({
    banner: `${config.serviceName} mail intake`,
    authOptional: true,
    disabledCommands: tls ? ["AUTH"] : ["AUTH", "STARTTLS"],
    ...(tls ? { key: readFileSync(tls.keyFile), cert: readFileSync(tls.certFile) } : {}),
    size: hardCap,
    maxClients: 100,
    socketTimeout: 60_000,
    closeTimeout: 5_000,
    logger: false,
    onRcptTo(address, session, callback) {
      if (address.address.toLowerCase() !== intakeAddress?.toLowerCase()) {
        return callback(smtpError(`No such mailbox here: write to ${intakeAddress}`, 550));
      }
      if (session.envelope.rcptTo.length > 0) return callback(smtpError("One recipient only", 452));
      callback();
    },
    onData,
  });
  server.on("error", (error) => log.warn({ err: error }, "SMTP intake connection error"));

  const port = await new Promise<number>((resolve, reject) => {
    const listening = server.server;
    listening.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "EADDRINUSE"
          ? new Error(
              `port ${smtpIntake.port} is already in use (set SMTP_INTAKE_PORT to another one)`,
            )
          : error,
      ),
    );
    server.listen(smtpIntake.port, smtpIntake.host, () =>
      resolve((listening.address() as AddressInfo).port),
    );
  });
  log.info({ host: smtpIntake.host, port }, "SMTP intake listening");

  // A sign of life while listening, so /api/health on any replica can tell.
  const beat = () =>
    recordIntakeAlive(sql, "smtp").catch((error: unknown) =>
      log.warn({ err: error }, "cannot record the intake's heartbeat"),
    );
  await beat();
  const heartbeat = setInterval(
    beat,
    Math.min(30_000, (config.mail.health.intakeMaxAgeSeconds * 1000) / 3),
  );
  heartbeat.unref();

  return {
    host: smtpIntake.host,
    port,
    async stop() {
      clearInterval(heartbeat);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
