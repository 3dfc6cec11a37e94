import { firstHeader, type RawHeaders } from "./rawHeaders.ts";

/**
 * Mail that no person wrote, which the service never answers, so no two robots can mail each
 * other forever (RFC 3834 §2, RFC 2369, RFC 3464): auto-replies, bounces and delivery
 * reports, mailing lists and bulk mail. Returns which sign gave it away, or null.
 */
export function automaticSign(mail: {
  headers: RawHeaders;
  contentType: string;
  from: string | null;
  /** SMTP MAIL FROM ('' is the null path of bounces); null on IMAP. */
  envelopeFrom: string | null;
}): string | null {
  const { headers } = mail;
  const autoSubmitted = firstHeader(headers, "auto-submitted")
    ?.split(/[;\s(]/)[0]
    ?.toLowerCase();
  if (autoSubmitted && autoSubmitted !== "no") return `Auto-Submitted: ${autoSubmitted}`;
  const precedence = firstHeader(headers, "precedence")?.toLowerCase();
  if (precedence && /^(bulk|junk|list|auto_reply)\b/.test(precedence)) {
    return `Precedence: ${precedence}`;
  }
  for (const name of ["list-id", "list-unsubscribe", "list-post", "x-autoreply", "x-autorespond"]) {
    if (headers.has(name)) return name;
  }
  const suppress = firstHeader(headers, "x-auto-response-suppress")?.toLowerCase() ?? "";
  if (/\b(all|oof|autoreply)\b/.test(suppress)) return "X-Auto-Response-Suppress";
  if (mail.envelopeFrom === "") return "empty return path (MAIL FROM:<>)";
  const returnPath = firstHeader(headers, "return-path");
  if (returnPath !== undefined && /^<\s*>$/.test(returnPath)) return "empty return path";
  if (mail.contentType === "multipart/report") return "delivery or read report";
  for (const address of [mail.from, mail.envelopeFrom, senderOf(headers)]) {
    const local = address?.split("@")[0]?.toLowerCase();
    if (local === "mailer-daemon" || local === "postmaster") return `${local} sender`;
  }
  return null;
}

function senderOf(headers: RawHeaders): string | null {
  const sender = firstHeader(headers, "sender") ?? firstHeader(headers, "from") ?? "";
  return /<([^<>]+)>/.exec(sender)?.[1] ?? (sender.includes("@") ? sender.trim() : null);
}
