import { authenticate, type DNSResolver } from "mailauth";
import { organizationalDomain } from "../mailRequests/organizationalDomain.ts";
import type { MailReason } from "../reasons/reasonCatalog.ts";
import { keepFirstSignatures } from "./rawHeaders.ts";

/**
 * Is the From address really the sender's? (MAIL_REQUIRE_AUTH.) DMARC decides when the From
 * domain publishes a policy; without one, an SPF pass for an aligned MAIL FROM domain or a
 * DKIM pass by an aligned signing domain is required. Anything else (a forged From, DNS
 * errors) is no: the service then never mails that address, so nobody can make it mail a
 * stranger. Checked with mailauth; `resolver` lets tests answer DNS themselves.
 *
 * The address answered comes from mailparser (readInbound.ts), the one checked from mailauth's
 * own reading of the header: the two must name the same single author, and the domain DMARC
 * checked must be that address's domain, or nothing is answered.
 *
 * The work is bounded: at most `maxSignatures` DKIM signatures are checked, each DNS lookup
 * gets `lookupTimeoutMs` and the whole check `deadlineMs`. A check that ran out of time is
 * `temporary`: the processor tries the message again later instead of refusing it.
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
  limits: { maxSignatures: number; deadlineMs: number; lookupTimeoutMs: number };
}

export type SenderVerdict =
  | { pass: true; how: string }
  | { pass: false; reason: MailReason; why: string; temporary: boolean };

function timeoutError(): Error {
  return Object.assign(new Error("DNS timeout"), { code: "ETIMEOUT" });
}

/** Relaxed alignment (RFC 7489 section 3.1): the same organizational domain. */
export function relaxedAligned(domain: string | undefined | false, fromDomain: string): boolean {
  if (!domain) return false;
  const org = organizationalDomain(domain);
  return org !== null && org === organizationalDomain(fromDomain);
}

const systemResolver: DNSResolver = (name, type) =>
  import("node:dns").then(
    ({ promises }) => promises.resolve(name, type) as Promise<string[] | string[][]>,
  );

export async function authenticateSender(
  raw: Buffer,
  from: string,
  context: SenderContext,
): Promise<SenderVerdict> {
  const fromAddress = from.toLowerCase();
  const fromDomain = fromAddress.slice(fromAddress.lastIndexOf("@") + 1);
  const ip = context.ip?.replace(/^::ffff:/, "") ?? undefined;
  const { limits } = context;
  const deadline = Date.now() + limits.deadlineMs;
  let timedOut = false;
  const base = context.resolver ?? systemResolver;
  // Each lookup ends by its own timeout or the overall deadline, whichever comes first; once
  // the deadline has passed every lookup fails at once, so mailauth finishes quickly.
  const resolver: DNSResolver = (name, type) => {
    const left = Math.min(limits.lookupTimeoutMs, deadline - Date.now());
    if (left <= 0) {
      timedOut = true;
      return Promise.reject(timeoutError());
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        timedOut = true;
        reject(timeoutError());
      }, left);
      base(name, type).then(
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
  };
  const bounded = keepFirstSignatures(raw, limits.maxSignatures);
  const outOfTime = (why: string): SenderVerdict => ({
    pass: false,
    reason: "auth_timeout",
    why,
    temporary: true,
  });
  let overall: NodeJS.Timeout | undefined;
  const result = await Promise.race([
    authenticate(bounded.raw, {
      ...(context.trustReceived
        ? { trustReceived: true }
        : { ip, helo: context.helo ?? undefined }),
      ...(context.envelopeFrom ? { sender: context.envelopeFrom } : {}),
      mta: context.mta,
      resolver,
      disableArc: true,
      disableBimi: true,
    }),
    // mailauth gets a short grace after the deadline to finish with failing lookups.
    new Promise<null>((resolve) => {
      overall = setTimeout(() => resolve(null), limits.deadlineMs + 1_000);
    }),
  ]).finally(() => clearTimeout(overall));
  if (result === null) return outOfTime(`no verdict within ${limits.deadlineMs} ms`);
  const { dkim, spf, dmarc } = result;

  // One author, the same to both parsers.
  const authors = dkim.headerFrom.map((address) => address.toLowerCase());
  if (dkim.fromFields !== 1 || authors.length !== 1 || authors[0] !== fromAddress) {
    return {
      pass: false,
      reason: "sender_mismatch",
      why: `the From read for DMARC (${authors.join(", ") || "none"}, ${dkim.fromFields} field(s)) is not ${fromAddress}`,
      temporary: false,
    };
  }
  const fail = (why: string): SenderVerdict =>
    timedOut
      ? outOfTime(`${why}, and a DNS lookup ran out of time`)
      : { pass: false, reason: "unauthenticated", why, temporary: false };

  const dmarcResult = dmarc ? dmarc.status.result : "none";
  if (dmarcResult === "pass") {
    const checked = dmarc ? (dmarc.status.header?.from ?? dmarc.domain ?? "") : "";
    if (checked.toLowerCase() !== fromDomain) {
      return {
        pass: false,
        reason: "sender_mismatch",
        why: `DMARC passed for ${checked}, not for ${fromDomain}`,
        temporary: false,
      };
    }
    return { pass: true, how: "dmarc=pass" };
  }
  if (dmarc && dmarcResult !== "none") return fail(`dmarc=${dmarcResult}`);
  if (spf && spf.status.result === "pass" && relaxedAligned(spf.domain, fromDomain)) {
    return { pass: true, how: `spf=pass (${spf.domain})` };
  }
  const signed = dkim.results.find(
    (entry) => entry.status?.result === "pass" && relaxedAligned(entry.signingDomain, fromDomain),
  );
  if (signed) return { pass: true, how: `dkim=pass (${signed.signingDomain})` };
  return fail(
    `no DMARC policy, and neither SPF (${spf ? spf.status.result : "none"}) nor DKIM passed for ${fromDomain}` +
      (bounded.dropped > 0
        ? ` (${bounded.dropped} DKIM signatures over the limit not checked)`
        : ""),
  );
}
