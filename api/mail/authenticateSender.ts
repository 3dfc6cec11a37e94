import { authenticate, type DNSResolver } from "mailauth";

/**
 * Is the From address really the sender's? (MAIL_REQUIRE_AUTH.) DMARC decides when the From
 * domain publishes a policy; without one, an SPF pass for an aligned MAIL FROM domain or a
 * DKIM pass by an aligned signing domain is required. Anything else (a forged From, DNS
 * errors) is no: the service then never mails that address, so nobody can make it mail a
 * stranger. Checked with mailauth; `resolver` lets tests answer DNS themselves.
 */

export interface SenderContext {
  /** The SMTP client's address and HELO name, and MAIL FROM; absent on IMAP. */
  ip?: string | null;
  helo?: string | null;
  envelopeFrom?: string | null;
  /** Take the client's address and HELO from the top Received header (IMAP, a relay). */
  trustReceived: boolean;
  /** Our host name, as the authserv-id. */
  mta: string;
  resolver?: DNSResolver;
}

export type SenderVerdict = { pass: true; how: string } | { pass: false; why: string };

const DNS_TIMEOUT_MS = 5_000;

function withTimeout(resolver: DNSResolver): DNSResolver {
  return (name, type) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(Object.assign(new Error("DNS timeout"), { code: "ETIMEOUT" })),
        DNS_TIMEOUT_MS,
      );
      resolver(name, type).then(
        (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
}

function aligned(domain: string | undefined, fromDomain: string): boolean {
  if (!domain) return false;
  const a = domain.toLowerCase();
  return a === fromDomain || a.endsWith(`.${fromDomain}`) || fromDomain.endsWith(`.${a}`);
}

export async function authenticateSender(
  raw: Buffer,
  from: string,
  context: SenderContext,
): Promise<SenderVerdict> {
  const fromDomain = from.slice(from.lastIndexOf("@") + 1).toLowerCase();
  const ip = context.ip?.replace(/^::ffff:/, "") ?? undefined;
  const { dkim, spf, dmarc } = await authenticate(raw, {
    ...(context.trustReceived ? { trustReceived: true } : { ip, helo: context.helo ?? undefined }),
    ...(context.envelopeFrom ? { sender: context.envelopeFrom } : {}),
    mta: context.mta,
    resolver: withTimeout(
      context.resolver ??
        ((name: string, type: string) =>
          import("node:dns").then(
            ({ promises }) => promises.resolve(name, type) as Promise<string[] | string[][]>,
          )),
    ),
    disableArc: true,
    disableBimi: true,
  });
  const dmarcResult = dmarc ? dmarc.status.result : "none";
  if (dmarcResult === "pass") return { pass: true, how: "dmarc=pass" };
  if (dmarc && dmarcResult !== "none") return { pass: false, why: `dmarc=${dmarcResult}` };
  if (spf && spf.status.result === "pass" && aligned(spf.domain, fromDomain)) {
    return { pass: true, how: `spf=pass (${spf.domain})` };
  }
  const signed = dkim.results.find(
    (result) => result.status?.result === "pass" && aligned(result.signingDomain, fromDomain),
  );
  if (signed) return { pass: true, how: `dkim=pass (${signed.signingDomain})` };
  return {
    pass: false,
    why: `no DMARC policy, and neither SPF (${spf ? spf.status.result : "none"}) nor DKIM passed for ${fromDomain}`,
  };
}
