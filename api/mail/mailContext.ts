import type { DNSResolver } from "mailauth";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import type { SmtpRefusalReason } from "../metrics/metricDefinitions.ts";

/** What the mail surface is built from: the surface context, and DNS for the sender checks. */
export interface MailContext extends SurfaceContext {
  /** Answers SPF, DKIM and DMARC lookups; the system's DNS when absent (tests bring their own). */
  dnsResolver?: DNSResolver;
  /** Counts what the SMTP intake refuses (GET /metrics' pay_and_earn_smtp_refusals_total). */
  countSmtpRefusal?: (reason: SmtpRefusalReason) => void;
}

/** True when `address` is one of the service's own mail addresses. */
export function isOwnMailAddress(context: Pick<SurfaceContext, "config">, address: string) {
  const { from, intakeAddress } = context.config.mail;
  const lower = address.toLowerCase();
  return lower === from?.toLowerCase() || lower === intakeAddress?.toLowerCase();
}
