/**
 * What a person asks for in a mail: the payout address, maybe a transaction hash, maybe an
 * agent name, read from the subject and the text the person wrote (quoted text, a quoted
 * earlier mail and the signature are left out). Nothing here validates: the claim's own
 * checks (the same as POST /api/claims) do, so an error reads the same on every surface; which
 * of what was written counts (not the service's own addresses, not what the claim knows) the
 * core decides (api/mailRequests/mailRequest.ts).
 */

import type { MailAsks } from "../mailRequests/mailRequest.ts";

const ADDRESS = /(?<![0-9A-Za-z])0x[0-9a-fA-F]{40}(?![0-9A-Za-z])/g;
const TX_HASH = /(?<![0-9A-Za-z])0x[0-9a-fA-F]{64}(?![0-9A-Za-z])/g;
const AGENT_LINE = /^\s*agent(?:[ _-]?name)?\s*[:=]\s*(.*?)\s*$/i;

/** Where a quoted earlier message starts, in the common mail clients' forms. */
const QUOTE_STARTS = [
  /^On .{1,200}wrote:\s*$/,
  /^Le .{1,200}a écrit\s*:\s*$/,
  /^Am .{1,200}schrieb .{0,200}:\s*$/,
  /^-{2,}\s*(Original Message|Forwarded message)\s*-{2,}/i,
  /^_{10,}\s*$/,
];

/** The text the sender wrote: up to the first quoted message or signature, without `>` lines. */
export function ownWords(text: string): string {
  const lines = text.split(/\r?\n/);
  const kept: string[] = [];
  for (const [index, line] of lines.entries()) {
    if (line === "-- " || line === "--") break;
    if (QUOTE_STARTS.some((start) => start.test(line.trim()))) break;
    // Outlook quotes the earlier message under a "From: … / Sent: …" block.
    if (/^From: /.test(line) && /^(Sent|Date): /.test(lines[index + 1] ?? "")) break;
    if (/^\s*>/.test(line)) continue;
    kept.push(line);
  }
  return kept.join("\n");
}

export function readRequest(parts: { subject: string; text: string }): MailAsks {
  const words = `${parts.subject}\n${ownWords(parts.text)}`;
  const addresses = new Map<string, string>();
  for (const [written] of words.matchAll(ADDRESS)) {
    const key = written.toLowerCase();
    const seen = addresses.get(key);
    // Prefer a mixed-case form: its checksum is then checked, as on every surface.
    if (!seen || (seen === key && written !== key)) addresses.set(key, written);
  }
  const txHashes = new Set<string>();
  for (const [written] of words.matchAll(TX_HASH)) txHashes.add(written.toLowerCase());
  let agentName: string | null = null;
  for (const line of ownWords(parts.text).split("\n")) {
    const match = AGENT_LINE.exec(line);
    if (match) {
      agentName = match[1] ?? "";
      break;
    }
  }
  return { addresses: [...addresses.values()], txHashes: [...txHashes], agentName };
}
