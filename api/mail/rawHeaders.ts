import { createHash } from "node:crypto";

/**
 * The header block of a raw message, read by hand before any MIME parser sees the message:
 * the intake needs the Message-ID to store a message (and must store even one that no parser
 * can read), and the loop checks need the headers as sent.
 */

/** A header block beyond this is not read (huge headers are stored and rejected). */
export const MAX_HEADER_BYTES = 64 * 1024;

export interface HeaderBlock {
  /** The bytes of the header block, without the blank line that ends it. */
  bytes: Buffer;
  /** False when no end of the header block was found within MAX_HEADER_BYTES. */
  complete: boolean;
  /** True when a blank line ends it (else the message is all header, or it was cut off). */
  ended: boolean;
}

export function headerBlock(raw: Buffer): HeaderBlock {
  const window = raw.subarray(0, MAX_HEADER_BYTES + 4);
  const crlf = window.indexOf("\r\n\r\n");
  const lf = window.indexOf("\n\n");
  const ends = [crlf, lf].filter((index) => index >= 0);
  if (ends.length > 0) {
    return { bytes: raw.subarray(0, Math.min(...ends)), complete: true, ended: true };
  }
  // No blank line: a message of headers only is whole if it is short enough.
  if (raw.length <= MAX_HEADER_BYTES) return { bytes: raw, complete: true, ended: false };
  return { bytes: raw.subarray(0, MAX_HEADER_BYTES), complete: false, ended: false };
}

/** Header fields by lower-case name, each value unfolded and trimmed, in order of appearance. */
export type RawHeaders = Map<string, string[]>;

export function readRawHeaders(block: Buffer): RawHeaders {
  const headers: RawHeaders = new Map();
  const lines = block.toString("latin1").split(/\r?\n/);
  let current: { name: string; value: string } | undefined;
  const flush = () => {
    if (!current) return;
    const values = headers.get(current.name) ?? [];
    values.push(current.value.trim());
    headers.set(current.name, values);
    current = undefined;
  };
  for (const line of lines) {
    if (/^[ \t]/.test(line) && current) {
      current.value += ` ${line.trim()}`;
      continue;
    }
    flush();
    const colon = line.indexOf(":");
    if (colon > 0) {
      current = { name: line.slice(0, colon).trim().toLowerCase(), value: line.slice(colon + 1) };
    }
  }
  flush();
  return headers;
}

/** The first value of a header, or undefined. */
export function firstHeader(headers: RawHeaders, name: string): string | undefined {
  return headers.get(name)?.[0];
}

const MESSAGE_ID = /^<[\x21-\x3b\x3d\x3f-\x7e]{1,250}>$/;

/**
 * The key a message is stored under: its Message-ID when it has a sane one, else a digest of
 * its bytes, so a redelivery of the same bytes is still recognised.
 */
export function storageMessageId(raw: Buffer, headers: RawHeaders): string {
  const declared = firstHeader(headers, "message-id")?.match(/<[^<>]*>/)?.[0];
  if (declared && MESSAGE_ID.test(declared)) return declared;
  return `<${createHash("sha256").update(raw).digest("hex")}@no-message-id.invalid>`;
}

/** True for the key storageMessageId makes up for a message without a Message-ID. */
export function isMadeUpMessageId(messageId: string): boolean {
  return messageId.endsWith("@no-message-id.invalid>");
}

/**
 * A header block that mail programs read differently: control characters (a line starting
 * with \x0b is a continuation to one parser and a new field to another), a bare CR, or more
 * than one From-like field. mailauth (which DMARC-checks one From) and mailparser (which gives
 * the address answered) must see the same author, so such a message is never answered.
 * Returns what was found, or null for a plain header block.
 */
export function headerTrick(block: Buffer): string | null {
  for (let index = 0; index < block.length; index += 1) {
    const byte = block[index] as number;
    if (byte === 0x09 || byte === 0x0a) continue;
    if (byte === 0x0d) {
      if (block[index + 1] === 0x0a) continue;
      return "a bare CR in the header block";
    }
    if (byte < 0x20 || byte === 0x7f) {
      return `control character 0x${byte.toString(16).padStart(2, "0")} in the header block`;
    }
  }
  let fromLines = 0;
  for (const line of block.toString("latin1").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    // The name as a lenient parser might read it: anything but letters, digits and '-' dropped.
    const name = line
      .slice(0, colon)
      .replace(/[^A-Za-z0-9-]/g, "")
      .toLowerCase();
    if (name === "from") fromLines += 1;
  }
  return fromLines > 1 ? `${fromLines} From fields` : null;
}

/**
 * The message with only its first `max` DKIM-Signature fields: the rest are removed before
 * mailauth sees it, so the work of checking one message has a bound (MAIL_DKIM_MAX_SIGNATURES).
 * The topmost fields are kept: they were added by the hops nearest to us.
 */
export function keepFirstSignatures(raw: Buffer, max: number): { raw: Buffer; dropped: number } {
  const block = headerBlock(raw);
  const lines = block.bytes.toString("latin1").split(/(?<=\n)/);
  const kept: string[] = [];
  let seen = 0;
  let dropping = false;
  for (const line of lines) {
    if (/^[ \t]/.test(line)) {
      if (!dropping) kept.push(line);
      continue;
    }
    const signature = /^dkim-signature\s*:/i.test(line);
    if (signature) seen += 1;
    dropping = signature && seen > max;
    if (!dropping) kept.push(line);
  }
  if (seen <= max) return { raw, dropped: 0 };
  let text = kept.join("");
  // The block ends without its line break (the blank line follows): keep it that way.
  if (!/\n$/.test(lines.at(-1) ?? "")) text = text.replace(/\r?\n$/, "");
  const head = Buffer.from(text, "latin1");
  return {
    raw: Buffer.concat([head, raw.subarray(block.bytes.length)]),
    dropped: seen - max,
  };
}
