import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import { type MailCatcher, startDevnetMailCatcher } from "./mailCatcher.ts";

/** The address the devnet's SMTP intake takes mail for. */
export const DEVNET_INTAKE_ADDRESS = "earn@pay-and-earn.localhost";

/**
 * The devnet's mail: a catcher that stores every outgoing message as an .eml file under
 * `<devnet>/mail/` (emptied on every start, like the chain), and the service settings that
 * turn the SMTP intake on and send through the catcher. Devnet senders have made-up domains,
 * so replies do not wait for DMARC (MAIL_REQUIRE_AUTH=false).
 */
export async function startDevnetMail(devnetDirectory: string): Promise<{
  catcher: MailCatcher;
  outbox: string;
  env: Record<string, string>;
}> {
  const outbox = resolve(devnetDirectory, "mail");
  await rm(outbox, { recursive: true, force: true });
  const catcher = await startDevnetMailCatcher(outbox);
  return {
    catcher,
    outbox,
    env: {
      MAIL_INTAKE: "smtp",
      MAIL_INTAKE_ADDRESS: DEVNET_INTAKE_ADDRESS,
      MAIL_REQUIRE_AUTH: "false",
      SMTP_URL: catcher.url,
    },
  };
}
