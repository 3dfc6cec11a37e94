import { createPrivateKey } from "node:crypto";
import { existsSync } from "node:fs";
import { BlockList, isIP } from "node:net";
import { z } from "zod";
import { wholeNumber } from "./settings.ts";

/**
 * The mail flow's settings (api/mail): where mail comes in (an SMTP listener or an IMAP
 * mailbox), how it goes out (an SMTP server, DKIM), and the safety limits. Part of the service
 * settings (serviceConfig.ts); `.env.example` documents each one.
 */

const mailAddress = z
  .string()
  .trim()
  .pipe(z.email({ message: "is not a mail address" }));

const urlWithProtocols = (protocols: string[], example: string) =>
  z
    .string()
    .refine(
      (value) =>
        URL.canParse(value) &&
        protocols.includes(new URL(value).protocol.replace(/:$/, "")) &&
        new URL(value).hostname !== "",
      { message: `is not a ${protocols.map((p) => `${p}://`).join(" or ")} URL (${example})` },
    );

const yesNo = z.enum(["true", "false"], { message: "must be true or false" });

export const mailSettings = {
  /** off: no mail comes in; smtp: listen as an MX (or behind a relay); imap: poll a mailbox. */
  MAIL_INTAKE: z
    .enum(["off", "smtp", "imap"], { message: "must be off, smtp or imap" })
    .default("off"),
  /** The address people write to; the From of the replies unless MAIL_FROM says otherwise. */
  MAIL_INTAKE_ADDRESS: mailAddress.optional(),
  MAIL_FROM: mailAddress.optional(),
  /** Outbound mail: smtp(s)://user:password@host:port. Without it nothing is sent. */
  SMTP_URL: urlWithProtocols(["smtp", "smtps"], "smtp://user:password@host:587").optional(),
  SMTP_INTAKE_HOST: z.string().min(1).default("127.0.0.1"),
  SMTP_INTAKE_PORT: wholeNumber(0, 65535).default(2525),
  /** Connections at once to the SMTP intake, in all and from one address. */
  MAIL_SMTP_MAX_CLIENTS: wholeNumber(1, 10_000).default(100),
  MAIL_SMTP_CONNECTIONS_PER_IP: wholeNumber(1, 10_000).default(5),
  /** Messages one address may begin (MAIL FROM) per hour, per replica. */
  MAIL_SMTP_MESSAGES_PER_IP_PER_HOUR: wholeNumber(1).default(60),
  /** An SMTP connection silent this long is closed. */
  MAIL_SMTP_SOCKET_TIMEOUT_SECONDS: wholeNumber(1, 3_600).default(30),
  /** Any SMTP connection is closed after this long, however busy (a slow drip holds a slot). */
  MAIL_SMTP_SESSION_SECONDS: wholeNumber(1, 86_400).default(300),
  SMTP_INTAKE_TLS_KEY_FILE: z.string().min(1).optional(),
  SMTP_INTAKE_TLS_CERT_FILE: z.string().min(1).optional(),
  /** imap(s)://user:password@host:port/mailbox (the mailbox defaults to INBOX). */
  IMAP_URL: urlWithProtocols(["imap", "imaps"], "imaps://user:password@host:993/INBOX").optional(),
  IMAP_POLL_SECONDS: wholeNumber(1, 3_600).default(60),
  /** PEM (PKCS#8 or PKCS#1; `\n` escapes allowed) of the key that DKIM-signs outbound mail. */
  DKIM_PRIVATE_KEY: z.string().min(1).optional(),
  DKIM_SELECTOR: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { message: "is not a DKIM selector" })
    .optional(),
  DKIM_DOMAIN: z
    .string()
    .regex(/^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$/, { message: "is not a domain name" })
    .optional(),
  /** Answer only senders that pass DMARC (or aligned SPF or DKIM). */
  MAIL_REQUIRE_AUTH: yesNo.default("true"),
  /** SMTP intake behind a relay: take the client's address and HELO from the top Received. */
  MAIL_TRUST_RECEIVED: yesNo.default("false"),
  /** The relays whose Received header is trusted: addresses or CIDR ranges, comma-separated. */
  MAIL_TRUSTED_RELAYS: z
    .string()
    .refine((value) => relayList(value) !== null, {
      message:
        "must be IP addresses or CIDR ranges separated by commas (10.0.0.5, 192.0.2.0/24, ::1)",
    })
    .default(""),
  /** DKIM signatures checked per message (the topmost); the rest are ignored. */
  MAIL_DKIM_MAX_SIGNATURES: wholeNumber(1, 50).default(5),
  /** The whole sender check of one message (DKIM, SPF, DMARC lookups), in ms. */
  MAIL_AUTH_DEADLINE_MS: wholeNumber(100, 300_000).default(20_000),
  /** One DNS lookup of the sender check, in ms. */
  MAIL_DNS_TIMEOUT_MS: wholeNumber(100, 60_000).default(5_000),
  /** Messages acted on are deleted after this many days (those of an open claim are kept). */
  MAIL_RETENTION_DAYS: wholeNumber(1, 3_650).default(30),
  MAIL_MAX_BYTES: wholeNumber(4_096, 50 * 1024 * 1024).default(1024 * 1024),
  MAIL_REPLIES_PER_SENDER_PER_HOUR: wholeNumber(1).default(10),
  MAIL_REPLIES_PER_DOMAIN_PER_HOUR: wholeNumber(1).default(50),
  MAIL_REPLIES_PER_HOUR: wholeNumber(1).default(500),
  /** A message over a reply budget waits; one that would wait longer is refused. */
  MAIL_REPLY_MAX_DELAY_HOURS: wholeNumber(1, 24 * 14).default(24),
  MAIL_SEND_INTERVAL_MS: wholeNumber(10, 60_000).default(1_000),
  MAIL_RETRY_SECONDS: wholeNumber(1, 86_400).default(60),
  MAIL_MAX_ATTEMPTS: wholeNumber(1, 100).default(8),
  MAIL_HEALTH_INTAKE_SECONDS: wholeNumber(1).default(300),
  MAIL_HEALTH_OUTBOX_SECONDS: wholeNumber(1).default(600),
};

/** Parses MAIL_TRUSTED_RELAYS into a BlockList (used as an allow list); null when malformed. */
function relayList(value: string): BlockList | null {
  const list = new BlockList();
  for (const entry of value
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean)) {
    const [address = "", bits, ...rest] = entry.split("/");
    const family = isIP(address);
    if (family === 0 || rest.length > 0) return null;
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) {
      list.addAddress(address, type);
      continue;
    }
    const prefix = Number(bits);
    if (!/^\d{1,3}$/.test(bits) || prefix > (family === 4 ? 32 : 128)) return null;
    list.addSubnet(address, prefix, type);
  }
  return list;
}

/** True when `ip` (as smtp-server reports it, maybe `::ffff:`-mapped) is one of `relays`. */
export function isTrustedRelay(relays: BlockList, ip: string | null | undefined): boolean {
  if (!ip) return false;
  const plain = ip.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "");
  const family = isIP(plain);
  if (family === 0) return false;
  return relays.check(plain, family === 4 ? "ipv4" : "ipv6");
}

type MailSettings = z.output<z.ZodObject<typeof mailSettings>>;

function pem(value: string): string {
  return value.includes("-----BEGIN") ? value.replaceAll("\\n", "\n") : value;
}

/** The rules between mail settings; each broken one is a line of the start-up error. */
export function checkMailSettings(settings: MailSettings, context: z.RefinementCtx): void {
  const problem = (path: string, message: string) =>
    context.addIssue({ code: "custom", path: [path], message });
  if (settings.MAIL_INTAKE !== "off") {
    if (!settings.MAIL_INTAKE_ADDRESS) {
      problem("MAIL_INTAKE_ADDRESS", `is required with MAIL_INTAKE=${settings.MAIL_INTAKE}`);
    }
    if (!settings.SMTP_URL) {
      problem("SMTP_URL", `is required with MAIL_INTAKE=${settings.MAIL_INTAKE} (replies go out)`);
    }
  }
  if (settings.MAIL_INTAKE === "imap") {
    if (!settings.IMAP_URL) problem("IMAP_URL", "is required with MAIL_INTAKE=imap");
    else {
      const url = new URL(settings.IMAP_URL);
      if (!url.username || !url.password) {
        problem("IMAP_URL", "must carry the user and password (imaps://user:password@host/INBOX)");
      }
    }
  }
  if (settings.SMTP_URL && !settings.MAIL_FROM && !settings.MAIL_INTAKE_ADDRESS) {
    problem("MAIL_FROM", "is required with SMTP_URL (the From of every mail sent)");
  }
  if (settings.MAIL_TRUST_RECEIVED === "true" && settings.MAIL_TRUSTED_RELAYS.trim() === "") {
    problem(
      "MAIL_TRUSTED_RELAYS",
      "is required with MAIL_TRUST_RECEIVED=true (the relays whose Received header is trusted; anyone else could write one)",
    );
  }
  if (Boolean(settings.SMTP_INTAKE_TLS_KEY_FILE) !== Boolean(settings.SMTP_INTAKE_TLS_CERT_FILE)) {
    problem("SMTP_INTAKE_TLS_CERT_FILE", "and SMTP_INTAKE_TLS_KEY_FILE go together");
  }
  for (const name of ["SMTP_INTAKE_TLS_KEY_FILE", "SMTP_INTAKE_TLS_CERT_FILE"] as const) {
    const file = settings[name];
    if (file && !existsSync(file)) problem(name, `names no file (${file})`);
  }
  if (settings.DKIM_PRIVATE_KEY) {
    try {
      createPrivateKey(pem(settings.DKIM_PRIVATE_KEY));
    } catch {
      problem("DKIM_PRIVATE_KEY", "is not a PEM private key");
    }
    if (!settings.DKIM_SELECTOR) problem("DKIM_SELECTOR", "is required with DKIM_PRIVATE_KEY");
  }
}

function domainOf(address: string): string {
  return address.slice(address.lastIndexOf("@") + 1).toLowerCase();
}

function imapConfig(imapUrl: string, pollSeconds: number) {
  const url = new URL(imapUrl);
  const secure = url.protocol === "imaps:";
  const mailbox = decodeURIComponent(url.pathname.replace(/^\/+/, "")) || "INBOX";
  return {
    host: url.hostname,
    port: url.port ? Number(url.port) : secure ? 993 : 143,
    secure,
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    mailbox,
    pollMs: pollSeconds * 1000,
  };
}

export function mailConfig(settings: MailSettings) {
  const from = settings.MAIL_FROM ?? settings.MAIL_INTAKE_ADDRESS;
  return {
    intake: settings.MAIL_INTAKE,
    intakeAddress: settings.MAIL_INTAKE_ADDRESS,
    /** The From of every mail the service sends; its domain names our Message-IDs. */
    from,
    domain: from ? domainOf(from) : "pay-and-earn.invalid",
    /** Secret (it may hold a password): never log it. */
    smtpUrl: settings.SMTP_URL,
    smtpIntake: {
      host: settings.SMTP_INTAKE_HOST,
      port: settings.SMTP_INTAKE_PORT,
      maxClients: settings.MAIL_SMTP_MAX_CLIENTS,
      connectionsPerIp: settings.MAIL_SMTP_CONNECTIONS_PER_IP,
      messagesPerIpPerHour: settings.MAIL_SMTP_MESSAGES_PER_IP_PER_HOUR,
      socketTimeoutMs: settings.MAIL_SMTP_SOCKET_TIMEOUT_SECONDS * 1000,
      sessionMs: settings.MAIL_SMTP_SESSION_SECONDS * 1000,
      tls:
        settings.SMTP_INTAKE_TLS_KEY_FILE && settings.SMTP_INTAKE_TLS_CERT_FILE
          ? {
              keyFile: settings.SMTP_INTAKE_TLS_KEY_FILE,
              certFile: settings.SMTP_INTAKE_TLS_CERT_FILE,
            }
          : undefined,
    },
    /** Secret (it holds a password): never log it. */
    imap:
      settings.MAIL_INTAKE === "imap" && settings.IMAP_URL
        ? imapConfig(settings.IMAP_URL, settings.IMAP_POLL_SECONDS)
        : undefined,
    dkim:
      settings.DKIM_PRIVATE_KEY && settings.DKIM_SELECTOR && from
        ? {
            domainName: settings.DKIM_DOMAIN ?? domainOf(from),
            keySelector: settings.DKIM_SELECTOR,
            privateKey: pem(settings.DKIM_PRIVATE_KEY),
          }
        : undefined,
    requireAuth: settings.MAIL_REQUIRE_AUTH === "true",
    trustReceived: settings.MAIL_TRUST_RECEIVED === "true",
    trustedRelays: relayList(settings.MAIL_TRUSTED_RELAYS) ?? new BlockList(),
    dkimMaxSignatures: settings.MAIL_DKIM_MAX_SIGNATURES,
    authDeadlineMs: settings.MAIL_AUTH_DEADLINE_MS,
    dnsTimeoutMs: settings.MAIL_DNS_TIMEOUT_MS,
    retentionDays: settings.MAIL_RETENTION_DAYS,
    maxBytes: settings.MAIL_MAX_BYTES,
    repliesPerSenderPerHour: settings.MAIL_REPLIES_PER_SENDER_PER_HOUR,
    repliesPerDomainPerHour: settings.MAIL_REPLIES_PER_DOMAIN_PER_HOUR,
    repliesPerHour: settings.MAIL_REPLIES_PER_HOUR,
    replyMaxDelayMs: settings.MAIL_REPLY_MAX_DELAY_HOURS * 3_600_000,
    sendIntervalMs: settings.MAIL_SEND_INTERVAL_MS,
    retryBaseMs: settings.MAIL_RETRY_SECONDS * 1000,
    maxAttempts: settings.MAIL_MAX_ATTEMPTS,
    health: {
      intakeMaxAgeSeconds: settings.MAIL_HEALTH_INTAKE_SECONDS,
      outboxMaxAgeSeconds: settings.MAIL_HEALTH_OUTBOX_SECONDS,
    },
  };
}

export type MailConfig = ReturnType<typeof mailConfig>;
