import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import type { SmtpRefusalReason } from "../metrics/metricDefinitions.ts";
import { acceptInbound } from "./acceptInbound.ts";
import type { MailContext } from "./mailContext.ts";

/**
 * The SMTP intake (MAIL_INTAKE=smtp), for a service that is its domain's MX or sits behind a
 * relay: accepts mail for the intake address only, keeps at most MAIL_MAX_BYTES of a message
 * (the rest is read and dropped; such a message gets one reply saying so), stores it, and
 * answers 250 only once it is stored, so a sending MTA retries whatever was not. A message
 * that declares or turns out over a hard cap is refused with 552 and never stored. One address
 * gets at most MAIL_SMTP_CONNECTIONS_PER_IP connections at once (421 beyond) and
 * MAIL_SMTP_MESSAGES_PER_IP_PER_HOUR messages begun an hour (450 at MAIL FROM beyond); an idle
 * connection is closed after MAIL_SMTP_SOCKET_TIMEOUT_SECONDS, any after
 * MAIL_SMTP_SESSION_SECONDS (a message cut off so is not stored: the sender retries it).
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
  const { config, logger, core } = context;
  const { smtpIntake, maxBytes, intakeAddress } = config.mail;
  const hardCap = Math.max(25 * 1024 * 1024, maxBytes * 4);
  const log = logger.child({ part: "smtp_intake" });
  const refused = (reason: SmtpRefusalReason) => context.countSmtpRefusal?.(reason);

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
        refused("too_large");
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
          refused("store_failed");
          callback(smtpError("Temporary failure, try again later", 451));
        },
      );
    });
  };

  // Per-IP limits: open connections, and messages begun (MAIL FROM) in the last hour, so one
  // address can neither hold the slots nor fill the table. This replica's own counts, on
  // purpose (docs/operating.md#the-mail-intakes-limits).
  const { connectionsPerIp, messagesPerIpPerHour, sessionMs } = smtpIntake;
  const open = new Map<string, string>();
  // A client that drips bytes is never idle: its whole session has a deadline too.
  const sessionTimers = new Map<string, NodeJS.Timeout>();
  const openFrom = (ip: string) => [...open.values()].filter((value) => value === ip).length;
  const begun = new Map<string, number[]>();
  const begunInLastHour = (ip: string) => {
    const since = Date.now() - 3_600_000;
    const times = (begun.get(ip) ?? []).filter((time) => time > since);
    if (times.length === 0) begun.delete(ip);
    else begun.set(ip, times);
    return times;
  };
  const forget = setInterval(() => {
    for (const ip of [...begun.keys()]) begunInLastHour(ip);
  }, 60_000);
  forget.unref();

  const tls = smtpIntake.tls;
  const server = new SMTPServer({
    banner: `${config.serviceName} mail intake`,
    authOptional: true,
    disabledCommands: tls ? ["AUTH"] : ["AUTH", "STARTTLS"],
    ...(tls ? { key: readFileSync(tls.keyFile), cert: readFileSync(tls.certFile) } : {}),
    size: hardCap,
    maxClients: smtpIntake.maxClients,
    socketTimeout: smtpIntake.socketTimeoutMs,
    closeTimeout: 5_000,
    logger: false,
    onConnect(session, callback) {
      const ip = session.remoteAddress;
      if (openFrom(ip) >= connectionsPerIp) {
        log.warn(
          { ip, open: connectionsPerIp },
          "SMTP connection refused: too many from this address",
        );
        refused("connections_per_ip");
        return callback(smtpError("Too many connections from your address, try again later", 421));
      }
      open.set(session.id, ip);
      const timer = setTimeout(() => {
        for (const connection of server.connections) {
          if (connection.session !== session) continue;
          log.warn({ ip, seconds: sessionMs / 1000 }, "SMTP session over its time, closed");
          refused("session_too_long");
          connection.send(421, "Session too long, closing");
          connection.close();
        }
      }, sessionMs);
      timer.unref();
      sessionTimers.set(session.id, timer);
      callback();
    },
    onClose(session) {
      open.delete(session.id);
      clearTimeout(sessionTimers.get(session.id));
      sessionTimers.delete(session.id);
    },
    onMailFrom(_address, session, callback) {
      const ip = session.remoteAddress;
      const times = begunInLastHour(ip);
      if (times.length >= messagesPerIpPerHour) {
        log.warn(
          { ip, limit: messagesPerIpPerHour },
          "SMTP message refused: too many from this address",
        );
        refused("messages_per_ip");
        return callback(
          smtpError("Too many messages from your address in the last hour, try again later", 450),
        );
      }
      times.push(Date.now());
      begun.set(ip, times);
      callback();
    },
    onRcptTo(address, session, callback) {
      if (address.address.toLowerCase() !== intakeAddress?.toLowerCase()) {
        refused("recipient");
        return callback(smtpError(`No such mailbox here: write to ${intakeAddress}`, 550));
      }
      if (session.envelope.rcptTo.length > 0) {
        refused("recipient");
        return callback(smtpError("One recipient only", 452));
      }
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
    core.mail
      .intakeAlive("smtp")
      .catch((error: unknown) => log.warn({ err: error }, "cannot record the intake's heartbeat"));
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
      clearInterval(forget);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
