import { type AddressObject, simpleParser } from "mailparser";
import {
  firstHeader,
  headerBlock,
  headerTrick,
  type RawHeaders,
  readRawHeaders,
} from "./rawHeaders.ts";

/**
 * A stored message as the mail processor reads it: the raw headers (for the loop checks), the
 * sender, the subject, the thread it answers and the text the person wrote. Never throws: a
 * message no parser can read comes back `unreadable`, one with a huge header block
 * `headersTooLarge`.
 */
export interface InboundMail {
  headers: RawHeaders;
  headersTooLarge: boolean;
  /** Control characters or several From fields in the header block (rawHeaders.headerTrick). */
  headerTrick: string | null;
  /** The MIME tree could not be read: only the header block is known. */
  unreadable: boolean;
  /** The From address (the only one answered), or null when there is none or several. */
  from: string | null;
  subject: string;
  inReplyTo: string[];
  references: string[];
  /** The text part, or the HTML part as text; empty when there is neither. */
  text: string;
  /** The top-level Content-Type, lower case, without parameters. */
  contentType: string;
}

const MESSAGE_IDS = /<[^<>\s]+>/g;

function messageIds(values: string[] | undefined): string[] {
  return (values ?? []).flatMap((value) => value.match(MESSAGE_IDS) ?? []);
}

function singleAddress(from: AddressObject | AddressObject[] | undefined): string | null {
  const objects = from === undefined ? [] : Array.isArray(from) ? from : [from];
  const addresses = objects.flatMap((object) =>
    object.value.flatMap((entry) => (entry.group ? entry.group : [entry])),
  );
  const [only] = addresses;
  if (addresses.length !== 1 || !only?.address) return null;
  const address = only.address.trim();
  return /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(address) ? address : null;
}

export async function readInbound(raw: Buffer, truncated: boolean): Promise<InboundMail> {
  const block = headerBlock(raw);
  const headers = readRawHeaders(block.bytes);
  // Over MAIL_MAX_BYTES only the header block is stored, ended by its blank line when it came
  // whole (acceptInbound.ts): one without it was cut off, and is not read as if it were whole.
  const complete = block.complete && (!truncated || block.ended);
  const base: InboundMail = {
    headers,
    headersTooLarge: !complete,
    headerTrick: headerTrick(block.bytes),
    unreadable: false,
    from: null,
    subject: "",
    inReplyTo: messageIds(headers.get("in-reply-to")),
    references: messageIds(headers.get("references")),
    text: "",
    contentType: (firstHeader(headers, "content-type") ?? "text/plain")
      .split(";")[0]
      ?.trim()
      .toLowerCase() as string,
  };
  if (!complete) return base;
  // Over the size limit only the header block was kept: read that alone.
  const source = truncated ? Buffer.concat([block.bytes, Buffer.from("\r\n\r\n")]) : raw;
  try {
    const parsed = await simpleParser(source, {
      skipHtmlToText: false,
      skipTextToHtml: true,
      skipTextLinks: true,
      skipImageLinks: true,
    });
    return {
      ...base,
      from: singleAddress(parsed.from),
      subject: (parsed.subject ?? "").slice(0, 500),
      text: (parsed.text ?? "").slice(0, 100_000),
    };
  } catch {
    // A MIME tree the parser gives up on: the headers alone still say who wrote.
    try {
      const parsed = await simpleParser(Buffer.concat([block.bytes, Buffer.from("\r\n\r\n")]));
      return {
        ...base,
        unreadable: true,
        from: singleAddress(parsed.from),
        subject: (parsed.subject ?? "").slice(0, 500),
      };
    } catch {
      return { ...base, unreadable: true };
    }
  }
}
