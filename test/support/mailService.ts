import type { DNSResolver } from "mailauth";
import type { SendMailOptions } from "nodemailer";
import { createLogger } from "../../api/logger.ts";
import { type RunningService, startService } from "../../api/service.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "./chainWithDatabase.ts";
import {
  type CaughtMail,
  sendToIntake,
  startTestMailCatcher,
  type TestMailCatcher,
} from "./mail.ts";
import { testServiceConfig } from "./service.ts";
import { type Stack, startStack } from "./stack.ts";

export interface MailService {
  catcher: TestMailCatcher;
  setup: ChainWithDatabase;
  service: RunningService;
  stop(): Promise<void>;
}

/**
 * A service with its SMTP intake on a free port, replying to a mail catcher, on a chain and
 * database of its own: what every mail test file starts. `env` names the intake address and
 * the settings under test; `resolver` holds the DNS records mailauth is given.
 */
export async function startMailService(
  env: Record<string, string> & { MAIL_INTAKE_ADDRESS: string },
  resolver?: DNSResolver,
): Promise<MailService> {
  const catcher = await startTestMailCatcher();
  const setup = await startChainWithDatabase({ migrate: true });
  const config = testServiceConfig(setup.chain, setup.database.url, {
    MAIL_INTAKE: "smtp",
    SMTP_INTAKE_PORT: "0",
    SMTP_URL: catcher.url,
    MAIL_SEND_INTERVAL_MS: "50",
    ...env,
  });
  const service = await startService(
    config,
    createLogger(config.logLevel),
    resolver ? { mailDnsResolver: resolver } : undefined,
  );
  return {
    catcher,
    setup,
    service,
    async stop() {
      await service.stop();
      await setup.stop();
      await catcher.stop();
    },
  };
}

/** A resolver answering from `zone` (name → type → records); each question noted in `asked`. */
export function zoneResolver(
  zone: Record<string, Record<string, unknown[]>>,
  asked: string[] = [],
): DNSResolver {
  return async (name, type) => {
    asked.push(`${type} ${name}`);
    const records = zone[name.toLowerCase().replace(/\.$/, "")]?.[type];
    if (records) return records as never;
    throw Object.assign(new Error(`query${type} ENOTFOUND ${name}`), { code: "ENOTFOUND" });
  };
}

/** The address the service reads mail at, in the tests of a whole stack. */
export const MAIL_INTAKE_ADDRESS = "earn@pay-and-earn.test";

export interface MailStack {
  stack: Stack;
  catcher: TestMailCatcher;
  /** Mails the SMTP intake as a mail server would, to MAIL_INTAKE_ADDRESS unless `to` says. */
  send(message: SendMailOptions): Promise<{ messageId: string }>;
  /** Mails the intake from `message.from` and waits for the next mail the service sends back. */
  sendAndReadReply(message: SendMailOptions & { from: string }): Promise<CaughtMail>;
  stop(): Promise<void>;
}

/**
 * A whole stack (Anvil, PostgreSQL, Ponder, the service) reading mail on its SMTP intake and
 * replying to a mail catcher, without sender authentication: the mail tests that pay and read
 * claims through the other surfaces too. `serviceEnv` adds the settings under test.
 */
export async function startMailStack(serviceEnv: Record<string, string> = {}): Promise<MailStack> {
  const catcher = await startTestMailCatcher();
  const stack = await startStack({
    serviceEnv: {
      MAIL_INTAKE: "smtp",
      SMTP_INTAKE_PORT: "0",
      MAIL_INTAKE_ADDRESS,
      SMTP_URL: catcher.url,
      MAIL_REQUIRE_AUTH: "false",
      MAIL_SEND_INTERVAL_MS: "50",
      ...serviceEnv,
    },
  });
  const send = (message: SendMailOptions) =>
    sendToIntake(stack.service.smtpIntake?.port ?? 0, { to: MAIL_INTAKE_ADDRESS, ...message });
  return {
    stack,
    catcher,
    send,
    async sendAndReadReply(message) {
      const before = catcher.to(message.from).length;
      await send(message);
      const replies = await catcher.waitFor(message.from, before + 1);
      return replies[before] as CaughtMail;
    },
    async stop() {
      await stack.stop();
      await catcher.stop();
    },
  };
}
