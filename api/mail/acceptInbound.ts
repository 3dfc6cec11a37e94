import { crashIfConfigured } from "../crashHook.ts";
import type { MailTransport } from "../mailbox/inboundMessages.ts";
import type { MailContext } from "./mailContext.ts";
import { headerBlock, readRawHeaders, storageMessageId } from "./rawHeaders.ts";

/**
 * Both intakes end here: the message is stored (keyed by its Message-ID) before anything acts
 * on it, and the mail processor is woken. A message over the size limit keeps only its header
 * block, with the blank line that ends it when one came within the bytes kept: without it,
 * readInbound knows the header block was cut off (by MAIL_MAX_BYTES or MAX_HEADER_BYTES) and
 * answers nothing, as for any header block too large to read. Returns false for a message
 * already stored (a redelivery).
 */
export async function acceptInbound(
  context: MailContext,
  message: {
    transport: MailTransport;
    /** The message, or its first bytes when `sizeBytes` is over MAIL_MAX_BYTES. */
    raw: Buffer;
    sizeBytes: number;
    envelopeFrom?: string | null;
    clientIp?: string | null;
    clientHelo?: string | null;
  },
): Promise<boolean> {
  const truncated = message.sizeBytes > context.config.mail.maxBytes;
  const block = headerBlock(message.raw);
  const raw = !truncated
    ? message.raw
    : block.ended
      ? Buffer.concat([block.bytes, Buffer.from("\r\n\r\n")])
      : block.bytes;
  const messageId = storageMessageId(raw, readRawHeaders(block.bytes));
  const stored = await context.core.mail.storeInbound({
    messageId,
    transport: message.transport,
    raw,
    truncated,
    sizeBytes: message.sizeBytes,
    envelopeFrom: message.envelopeFrom,
    clientIp: message.clientIp,
    clientHelo: message.clientHelo,
  });
  context.logger.info(
    { message_id: messageId, transport: message.transport, bytes: message.sizeBytes, new: stored },
    "mail received",
  );
  crashIfConfigured(context.config, "after_mail_stored");
  return stored;
}
