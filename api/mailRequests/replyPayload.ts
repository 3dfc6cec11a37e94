import type { AttachedState } from "../claims/attachTx.ts";
import type { MailReason } from "../reasons/reasonCatalog.ts";
import type { RefusalDescription } from "../reasons/refusal.ts";

/**
 * What a reply to an inbound message says, as stored in its outbox row (`payload`) when the
 * message is acted on; the words are written when the mail is sent (api/mail/composeMail.ts).
 */
export type ReplyPayload =
  /** A help text of the catalog (no address, two addresses …), with what was found. */
  | { type: "help"; reason: MailReason; found?: string[] }
  /** The claim or the attachment was refused: the use-case's refusal, as every surface shows it. */
  | { type: "refusal"; refusal: Pick<RefusalDescription, "code" | "title" | "detail" | "fields"> }
  /** A transaction hash was attached to the claim of the thread. */
  | { type: "attached"; state: AttachedState; txHash: string }
  /** A reply without anything to act on: the claim's status. */
  | { type: "status"; note?: MailReason };
