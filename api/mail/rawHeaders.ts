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
}

export function headerBlock(raw: Buffer): HeaderBlock {
  const window = raw.subarray(0, MAX_HEADER_BYTES + 4);
  const crlf = window.indexOf("\r\n\r\n");
  const lf = window.indexOf("\n\n");
  const ends = [crlf, lf].filter((index) => index >= 0);
  if (ends.length > 0) return { bytes: raw.subarray(0, Math.min(...ends)), complete: true };
  // No blank line: a message of headers only is whole if it is short enough.
  if (raw.length <= MAX_HEADER_BYTES) return { bytes: raw, complete: true };
  return { bytes: raw.subarray(0, MAX_HEADER_BYTES), complete: false };
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
