import { createPrivateKey } from "node:crypto";
import { existsSync } from "node:fs";
import { BlockList, isIP } from "node:net";
import { z } from "zod";
import { wholeNumber } from "./settings.ts";

/**
 * The mail flow's settings (api/mail): where mail comes in (an SMTP listener or an IMAP
 * mailbox), how it goes out (an SMTP server, DKIM), and the safety limits. Part of the service
 * settings (serviceConfig.ts); each says what it means (`.describe`), and
 * docs/configuration.md is written from them (`npm run docs:config`).
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
  MAIL_INTAKE: z
    .enum(["off", "smtp", "imap"], { message: "must be off, smtp or imap" })
    .default("off")
    .describe(
      "Where mail comes in: `off`, `smtp` (listen as the domain's MX or behind a relay) or `imap` (poll a hosted mailbox). `npm start` on the devnet turns `smtp` on with a local mail catcher.",
    ),
  MAIL_INTAKE_ADDRESS: mailAddress
    .optional()
    .describe(
      "The address people write to; required with an intake. The From of the replies unless `MAIL_FROM` says otherwise.",
    ),
  MAIL_FROM: mailAddress
    .optional()
    .describe(
      "From of every mail sent; its domain names our Message-IDs. Unset: `MAIL_INTAKE_ADDRESS`.",
    ),
  SMTP_URL: urlWithProtocols(["smtp", "smtps"], "smtp://user:password@host:587")
    .optional()
    .describe(
      "Outbound mail server, `smtp://user:password@host:587` (STARTTLS when offered) or `smtps://…:465`; required with an intake. Without it nothing is sent: receipt mails wait in the outbox.",
    ),
  SMTP_INTAKE_HOST: z
    .string()
    .min(1)
    .default("127.0.0.1")
    .describe("Where the SMTP intake listens."),
  SMTP_INTAKE_PORT: wholeNumber(0, 65535).default(2525).describe("The SMTP intake's port."),
  MAIL_SMTP_MAX_CLIENTS: wholeNumber(1, 10_000)
    .default(100)
    .describe(
      "SMTP connections at once, in all, per replica (421 beyond; logged `SMTP connection refused`).",
    ),
  MAIL_SMTP_CONNECTIONS_PER_IP: wholeNumber(1, 10_000)
    .default(5)
    .describe(
      "SMTP connections at once from one address, per replica ([why per replica](operating.md#the-mail-intakes-limits)).",
    ),
  MAIL_SMTP_MESSAGES_PER_IP_PER_HOUR: wholeNumber(1)
    .default(60)
    .describe(
      "Messages one address may begin (`MAIL FROM`) per hour, counted per replica (450 beyond; logged `SMTP message refused`).",
    ),
  MAIL_SMTP_SOCKET_TIMEOUT_SECONDS: wholeNumber(1, 3_600)
    .default(30)
    .describe("An SMTP connection silent this long is closed."),
  MAIL_SMTP_SESSION_SECONDS: wholeNumber(1, 86_400)
    .default(300)
    .describe(
      "Any SMTP connection is closed after this long, however busy: a client dripping bytes is never idle (421; a message cut off is not stored; logged `SMTP session over its time`).",
    ),
  SMTP_INTAKE_TLS_KEY_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "STARTTLS on the intake: the key (PEM file); without both files STARTTLS is not offered.",
    ),
  SMTP_INTAKE_TLS_CERT_FILE: z
    .string()
    .min(1)
    .optional()
    .describe("STARTTLS on the intake: the certificate (PEM file)."),
  IMAP_URL: urlWithProtocols(["imap", "imaps"], "imaps://user:password@host:993/INBOX")
    .optional()
    .describe(
      "The mailbox (`MAIL_INTAKE=imap`): `imaps://user:password@host:993/INBOX` (percent-encode the user and password; the mailbox defaults to INBOX).",
    ),
  IMAP_POLL_SECONDS: wholeNumber(1, 3_600)
    .default(60)
    .describe("New mail is noticed by IDLE, and at the latest this often."),
  DKIM_PRIVATE_KEY: z
    .string()
    .min(1)
    .optional()
    .describe(
      "PEM (PKCS#8 or PKCS#1; `\\n` escapes allowed) of the key that DKIM-signs outbound mail.",
    ),
  DKIM_SELECTOR: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { message: "is not a DKIM selector" })
    .optional()
    .describe(
      "The DKIM key's selector (published at `<selector>._domainkey.<domain>`); required with a key.",
    ),
  DKIM_DOMAIN: z
    .string()
    .regex(/^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$/, { message: "is not a domain name" })
    .optional()
    .describe("The DKIM signing domain. Unset: `MAIL_FROM`'s."),
  MAIL_REQUIRE_AUTH: yesNo
    .default("true")
    .describe(
      "Answer only senders whose From domain passes DMARC (or, without a DMARC policy, aligned SPF or DKIM), so a forged From cannot make the service mail a stranger. Keep it true in production.",
    ),
  MAIL_TRUST_RECEIVED: yesNo
    .default("false")
    .describe(
      "The SMTP intake sits behind a relay: SPF reads the client's address and HELO from the top `Received` header, on connections from `MAIL_TRUSTED_RELAYS` only.",
    ),
  MAIL_TRUSTED_RELAYS: z
    .string()
    .refine((value) => relayList(value) !== null, {
      message:
        "must be IP addresses or CIDR ranges separated by commas (10.0.0.5, 192.0.2.0/24, ::1)",
    })
    .default("")
    .describe(
      "The relays whose `Received` header is believed, as addresses or CIDR ranges, comma-separated (`10.0.0.5, 192.0.2.0/24, ::1`); required with `MAIL_TRUST_RECEIVED=true`. Any other client is checked by its own address and HELO.",
    ),
  MAIL_DKIM_MAX_SIGNATURES: wholeNumber(1, 50)
    .default(5)
    .describe("DKIM signatures checked per message (the topmost); the rest are ignored."),
  MAIL_AUTH_DEADLINE_MS: wholeNumber(100, 300_000)
    .default(20_000)
    .describe(
      "The whole sender check (DKIM, SPF, DMARC) of one message; out of time, it is tried again later, and after 5 tries the message is rejected `auth_timeout`.",
    ),
  MAIL_DNS_TIMEOUT_MS: wholeNumber(100, 60_000)
    .default(5_000)
    .describe("One DNS lookup of the sender check."),
  MAIL_RETENTION_DAYS: wholeNumber(1, 3_650)
    .default(30)
    .describe(
      "A message keeps only its header block once acted on; its row is deleted this many days later (checked every 10 min by the idle mail processor), unless its claim is still open.",
    ),
  MAIL_MAX_BYTES: wholeNumber(4_096, 50 * 1024 * 1024)
    .default(1024 * 1024)
    .describe(
      "Larger messages keep only their headers and get one reply saying so; one whose header block does not end within this many bytes (or 64 KiB) gets none (`headers_too_large`).",
    ),
  MAIL_REPLIES_PER_SENDER_PER_HOUR: wholeNumber(1)
    .default(10)
    .describe(
      "Replies (instructions and answers, never receipts) per hour to one sender address; a message over a budget waits (`rate_limited`, still `received`) until a reply leaves the hour.",
    ),
  MAIL_REPLIES_PER_DOMAIN_PER_HOUR: wholeNumber(1)
    .default(50)
    .describe("The same per organizational domain of the sender (by the Public Suffix List)."),
  MAIL_REPLIES_PER_HOUR: wholeNumber(1).default(500).describe("The same overall."),
  MAIL_REPLY_MAX_DELAY_HOURS: wholeNumber(1, 24 * 14)
    .default(24)
    .describe(
      "No answer goes out later than this after its message arrived: a message that would wait longer for a reply budget is refused (`rate_limited`), one not acted on in time is refused (`too_late`), an answer still in the outbox then is failed (`too late` in `last_error`).",
    ),
  MAIL_SEND_INTERVAL_MS: wholeNumber(10, 60_000)
    .default(1_000)
    .describe("How often the outbox's sender looks when idle."),
  MAIL_RETRY_SECONDS: wholeNumber(1, 86_400)
    .default(60)
    .describe("The outbox's first retry delay (it doubles)."),
  MAIL_MAX_ATTEMPTS: wholeNumber(1, 100)
    .default(8)
    .describe("Attempts before an outbox mail is failed for good."),
  MAIL_HEALTH_INTAKE_SECONDS: wholeNumber(1)
    .default(300)
    .describe("Health says `mail_intake_down` when the intake gave no sign of life for this long."),
  MAIL_HEALTH_OUTBOX_SECONDS: wholeNumber(1)
    .default(600)
    .describe("Health says `mail_outbox_behind` when a mail waited this long in the outbox."),
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
