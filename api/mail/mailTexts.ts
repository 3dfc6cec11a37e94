import type { ClaimView } from "../claims/claimView.ts";
import type { ReplyPayload } from "../mailRequests/replyPayload.ts";
import { ATTACHED_STATES, MAIL_REASONS } from "../reasons/reasonCatalog.ts";
import type { receiptView } from "../receipts/receiptView.ts";

/**
 * The words of every mail the service sends, plain text for people with only a mail client,
 * built from the same views as every other surface (claimView, receiptView) and the reason
 * catalog. Nothing here reads a database or knows SMTP.
 */

type ReceiptView = ReturnType<typeof receiptView>;

export interface MailSite {
  service: string;
  site: string;
  intakeAddress: string | undefined;
  confirmations: number;
  /** Matching variant A: each claim has its own exact amount, payable from any wallet. */
}

function paragraph(...lines: (string | null | undefined | false)[]): string {
  return lines.filter((line): line is string => typeof line === "string").join("\n");
}

function footer(site: MailSite): string {
  return paragraph(
    "--",
    `${site.service}: pay 10 USDC on Base, receive 1 USDC back and a signed receipt.`,
    `${site.site}/api/info`,
  );
}

/** The claim's page for people (it follows the payment live), and its JSON for programs. */
function claimLinkLines(site: MailSite, claim: ClaimView): string {
  return paragraph(
    `Your claim's page (it follows your payment live): ${site.site}/claims/${claim.claim_id}`,
    `For programs (JSON): ${claim.status_url}`,
  );
}

const REPLY_WITH_HASH =
  "If your payment is not picked up (for example the amount was not exact), reply to this " +
  "mail with its transaction hash (0x followed by 64 hexadecimal digits): it is attached to " +
  "this claim.";

/** What to pay and where, while a claim awaits payment; else where it stands. */
export function instructionsText(site: MailSite, claim: ClaimView): string {
  const pay = claim.payment_instructions;
  if (!pay) return statusText(site, claim);
  return [
    `Your claim ${claim.claim_id} is open. Pay, and ${claim.payout_usdc} USDC comes back to ` +
      `${claim.payout_address} with a signed receipt.`,
    paragraph("How to pay:", ...pay.ways.map((way) => `  - ${way}`)),
    paragraph(
      `  Amount:        ${pay.amount_usdc} USDC${pay.unique_amount ? " (exactly this: the amount tells your payment apart)" : ""}`,
      `  Pay to:        ${pay.pay_to}`,
      `  Network:       ${pay.network} (chain id ${pay.chain_id})`,
      `  USDC contract: ${pay.usdc_contract}`,
      `  Pay before:    ${pay.pay_before} (unpaid claims expire)`,
      `  Payout to:     ${claim.payout_address}`,
    ),
    claimLinkLines(site, claim),
    REPLY_WITH_HASH,
    `The receipt comes as a reply in this thread once the payout is made (seconds after your ` +
      `payment has ${site.confirmations} confirmations).`,
    pay.warning,
    footer(site),
  ].join("\n\n");
}

/** Where a claim stands, for a reply that asks nothing else. */
export function statusText(site: MailSite, claim: ClaimView, note?: string): string {
  return [
    note,
    `Your claim ${claim.claim_id} is ${claim.status.replace("_", " ")}. ${claim.next_step}`,
    paragraph(
      `  Payout to:  ${claim.payout_address}`,
      claim.payment
        ? `  Payment:    ${claim.payment.tx_hash} (${claim.payment.amount_usdc} USDC)`
        : null,
      claim.payout_tx ? `  Payout tx:  ${claim.payout_tx}` : null,
      claim.payout_explorer_url ? `              ${claim.payout_explorer_url}` : null,
    ),
    claimLinkLines(site, claim),
    claim.status === "awaiting_payment" ? instructionsReminder(claim) : null,
    footer(site),
  ]
    .filter((part): part is string => typeof part === "string")
    .join("\n\n");
}

function instructionsReminder(claim: ClaimView): string {
  const pay = claim.payment_instructions;
  return paragraph(
    ...(pay ? ["How to pay:", ...pay.ways.map((way) => `  - ${way}`)] : []),
    "",
    REPLY_WITH_HASH,
  );
}

/** The answer to a message that made no claim, or to a reply in a claim's thread. */
export function replyText(site: MailSite, payload: ReplyPayload, claim: ClaimView | null): string {
  switch (payload.type) {
    case "help": {
      const found =
        payload.found && payload.found.length > 0
          ? paragraph("Found:", ...payload.found.map((value) => `  ${value}`))
          : null;
      return [
        MAIL_REASONS[payload.reason],
        found,
        claim ? null : howToWrite(site),
        claim ? instructionsReminder(claim) : null,
        footer(site),
      ]
        .filter((part): part is string => typeof part === "string")
        .join("\n\n");
    }
    case "refusal": {
      const { title, detail } = payload.refusal;
      return [
        `${title}${title.endsWith(".") ? "" : "."}${detail ? ` ${detail}` : ""}`,
        `(reason: ${payload.refusal.code}${typeof payload.refusal.fields.reason === "string" ? `, ${payload.refusal.fields.reason}` : ""})`,
        claim
          ? paragraph(
              `Your claim ${claim.claim_id} is ${claim.status.replace("_", " ")}.`,
              claimLinkLines(site, claim),
            )
          : howToWrite(site),
        footer(site),
      ].join("\n\n");
    }
    case "attached":
      return [
        `The transaction ${payload.txHash} is attached to your claim${claim ? ` ${claim.claim_id}` : ""}. ${ATTACHED_STATES[payload.state]}`,
        claim ? claimLinkLines(site, claim) : null,
        "The receipt comes as a reply in this thread once the payout is made.",
        footer(site),
      ]
        .filter((part): part is string => typeof part === "string")
        .join("\n\n");
    case "status":
      if (!claim) return howToWrite(site);
      return statusText(site, claim, payload.note ? MAIL_REASONS[payload.note] : undefined);
  }
}

/** How to earn by mail, for a message that could not be acted on. */
export function howToWrite(site: MailSite): string {
  return paragraph(
    `How to earn by mail: write${site.intakeAddress ? ` to ${site.intakeAddress}` : ""} a message with the`,
    "address that should receive the 1 USDC payout (0x followed by 40 hexadecimal digits), and",
    "nothing else is needed, for example:",
    "",
    "  0x976EA74026E726554dB657fA54763abd0C3a0aa9",
    "  agent: my-agent        (optional: a name shown on the public ledger)",
    "",
    "The reply says exactly how much USDC to send, where, and on which network. Add a",
    "transaction hash (0x followed by 64 hexadecimal digits) if you have paid already.",
  );
}

/** The receipt, with how to check it; `receipt.json` carries the same. */
export function receiptText(site: MailSite, claim: ClaimView, receipt: ReceiptView): string {
  return [
    `Your claim ${claim.claim_id} is completed: ${claim.payout_usdc} USDC was paid to ${claim.payout_address}.`,
    paragraph(
      `Payout tx: ${claim.payout_tx ?? "(unknown)"}`,
      claim.payout_explorer_url ? `           ${claim.payout_explorer_url}` : null,
      claim.payment
        ? `Payment:   ${claim.payment.tx_hash} (${claim.payment.amount_usdc} USDC)`
        : null,
    ),
    "The receipt: an EIP-191 signed statement, also attached as receipt.json. The message is " +
      "the lines between the markers, joined with newlines (\\n):",
    paragraph("-----BEGIN RECEIPT MESSAGE-----", receipt.message, "-----END RECEIPT MESSAGE-----"),
    paragraph(`Signature: ${receipt.signature}`, `Signer:    ${receipt.signer}`),
    paragraph(
      "How to verify it:",
      `  - with viem: await verifyMessage({ address: "${receipt.signer}", message, signature })`,
      "    (message and signature as in receipt.json); true means this service's key signed it.",
      `  - or POST {"message": …, "signature": …} (from receipt.json) to ${receipt.verify_url}`,
      "    to learn whether it is genuine and the receipt on record.",
      `  - the signer is the service's receipt key, published as receipt_signer at ${site.site}/api/info.`,
    ),
    footer(site),
  ].join("\n\n");
}
