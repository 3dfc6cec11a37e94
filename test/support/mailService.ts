import type { DNSResolver } from "mailauth";
import { createLogger } from "../../api/logger.ts";
import { type RunningService, startService } from "../../api/service.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "./chainWithDatabase.ts";
import { startTestMailCatcher, type TestMailCatcher } from "./mail.ts";
import { testServiceConfig } from "./service.ts";

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
