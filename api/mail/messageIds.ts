import { CLAIM_ID_PATTERN } from "../schemas/inputs.ts";

/**
 * The Message-IDs of the mails the service sends: `<pae.<outbox id>.<claim id or none>@<domain>>`.
 * Fixed by the outbox row, so a mail sent again after a crash carries the same one; they name
 * the claim, so a reply in the thread names its claim through its In-Reply-To and References
 * (the thread, not the sender's words), and a mail of ours that comes back is recognised.
 */

export function outboundMessageId(
  outboxId: bigint,
  claimId: string | null,
  domain: string,
): string {
  return `<pae.${outboxId}.${claimId ?? "none"}@${domain}>`;
}

function parse(messageId: string, domain: string): { claimId: string | null } | null {
  const match = /^<pae\.(\d+)\.([A-Za-z0-9_-]+)@([^>]+)>$/.exec(messageId.trim());
  if (!match || match[3]?.toLowerCase() !== domain.toLowerCase()) return null;
  const claimId = match[2] as string;
  if (claimId === "none") return { claimId: null };
  return CLAIM_ID_PATTERN.test(claimId) ? { claimId } : null;
}

export function isOwnMessageIdFormat(messageId: string, domain: string): boolean {
  return parse(messageId, domain) !== null;
}

/**
 * The claim a reply belongs to: the claim named by the newest of our Message-IDs it answers
 * (In-Reply-To first, then References from the newest), or null.
 */
export function claimInThread(
  thread: { inReplyTo: string[]; references: string[] },
  domain: string,
): string | null {
  for (const messageId of [...thread.inReplyTo, ...[...thread.references].reverse()]) {
    const claimId = parse(messageId, domain)?.claimId;
    if (claimId) return claimId;
  }
  return null;
}
