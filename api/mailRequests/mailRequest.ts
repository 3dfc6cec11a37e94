import type { MailReason } from "../reasons/reasonCatalog.ts";

/** What a person asks for in a mail, everything written (api/mail/readRequest.ts reads it). */
export interface MailAsks {
  /**
   * The distinct addresses written (compared case-insensitively), each as written; when an
   * address is written both in lower case and in mixed case, the mixed-case form, whose
   * checksum must then hold.
   */
  addresses: string[];
  /** The distinct transaction hashes written, lower case. */
  txHashes: string[];
  /** From an `agent: …` (or `agent_name: …`) line. */
  agentName: string | null;
}

/**
 * A stored inbound message as the mail surface read it, for the core to decide on
 * (handleMailRequest.ts). What only mail knows (the header block, automatic mail, the sender
 * check, the thread's Message-IDs, the words) is read there; what to do is decided here.
 */
export interface MailRequest {
  messageId: string;
  receivedAt: Date;
  /** Over MAIL_MAX_BYTES: only its header block was kept. */
  truncated: boolean;
  /** What the message keeps once acted on (the answers in its thread need it, never its body). */
  headerBlock: Buffer;
  /** The single From address, or null. */
  from: string | null;
  subject: string | null;
  /**
   * Why reading it found it must not be answered, before anything else (a header block too
   * large or read differently by mail programs, automatic mail), or null.
   */
  notAnswered: { status: "ignored" | "rejected"; reason: MailReason } | null;
  /** One of the service's own mails (its Message-ID form, or its own address as sender). */
  ownMessage: boolean;
  /** The sender check refused it (MAIL_REQUIRE_AUTH), and why; null when it passed or is off. */
  unauthenticated: MailReason | null;
  /** The MIME tree could not be read. */
  unreadable: boolean;
  /** The claim named by the newest of the service's Message-IDs the message answers. */
  threadClaimId: string | null;
  asks: MailAsks;
}

/** `asks` without the addresses and hashes in `leftOut` (compared case-insensitively). */
export function askedBeyond(
  asks: MailAsks,
  leftOut: { addresses: Iterable<string>; txHashes?: Iterable<string> },
): MailAsks {
  const addresses = new Set([...leftOut.addresses].map((address) => address.toLowerCase()));
  const hashes = new Set([...(leftOut.txHashes ?? [])].map((hash) => hash.toLowerCase()));
  return {
    addresses: asks.addresses.filter((address) => !addresses.has(address.toLowerCase())),
    txHashes: asks.txHashes.filter((hash) => !hashes.has(hash)),
    agentName: asks.agentName,
  };
}
