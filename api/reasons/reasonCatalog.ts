/**
 * Every stable reason code the service answers with, once: what a refusal is called (the
 * snake_case code clients branch on), the HTTP status it is on REST, a title, and words for
 * people. REST problems (`/problems/<code>`), the OpenAPI document, GraphQL errors, MCP and
 * A2A tool errors, mail replies and the CLI all read this file; none of them words a reason
 * of its own. Codes are a contract: add new ones, never rename one.
 */

export interface ProblemReason {
  status: number;
  title: string;
  /** Said when the refusal carries no more precise detail of its own. */
  detail?: string;
}

export const PROBLEM_REASONS = {
  // ── any request ──
  invalid_request: { status: 400, title: "The request is not valid" },
  malformed_json: { status: 400, title: "The body is not valid JSON" },
  bad_request: { status: 400, title: "The request is not valid" },
  unauthorized: { status: 401, title: "Authorization required" },
  not_found: { status: 404, title: "Not found" },
  method_not_allowed: { status: 405, title: "Method not allowed" },
  body_too_large: { status: 413, title: "The body is too large" },
  unsupported_media_type: {
    status: 415,
    title: "The body must be application/json",
  },
  unsupported_form_type: {
    status: 415,
    title: "The form must be sent as application/x-www-form-urlencoded",
  },
  rate_limited: { status: 429, title: "Too many requests" },
  cross_site_form: {
    status: 403,
    title: "This form can only be sent from this service's own pages",
    detail: "Open the page on this site and send the form from there.",
  },
  temporarily_unavailable: {
    status: 503,
    title: "The service cannot take this request right now",
    detail: "A dependency is slow or unreachable; try again after Retry-After seconds.",
  },
  internal_error: {
    status: 500,
    title: "Something went wrong on our side",
    detail: "The error is logged; quote the request_id when you report it.",
  },
  // ── claims ──
  claim_not_found: { status: 404, title: "No such claim" },
  claim_expired: {
    status: 410,
    title: "The claim has expired",
    detail: "Unpaid claims expire after their lifetime. Create a new claim.",
  },
  claim_not_open: { status: 409, title: "The claim is no longer awaiting payment" },
  tx_already_used: {
    status: 409,
    title: "The transaction is already used by another claim",
    detail: "A transfer pays at most one claim; this one is named by, or has paid, another.",
  },
  tx_not_qualifying: {
    status: 422,
    title: "The transaction does not qualify as this claim's payment",
  },
  x402_claim_not_attachable: {
    status: 409,
    title: "An x402 claim is paid by its authorization only",
    detail:
      "Nothing can be attached to a claim created by an x402 payment; its payment is the authorization it was created with.",
  },
  receipt_not_ready: { status: 409, title: "The receipt is not ready" },
  too_many_open_claims: {
    status: 429,
    title: "Too many open claims from this client",
  },
  too_many_open_tasks: {
    status: 429,
    title: "Too many tasks waiting for a payment from this client",
  },
  too_many_streams: {
    status: 429,
    title: "Too many live event streams from this client",
  },
  // ── payments ──
  tx_not_found: {
    status: 404,
    title: "The chain does not know this transaction",
    detail: "It is not mined (yet), or the hash is wrong.",
  },
  // ── x402 ──
  payment_required: { status: 402, title: "Payment required" },
  payment_refused: { status: 402, title: "The payment was refused" },
  facilitator_unavailable: {
    status: 503,
    title: "The payment facilitator is unavailable",
    detail: "The payment facilitator cannot be reached. Nothing was charged; try again shortly.",
  },
  payment_already_used: {
    status: 409,
    title: "This payment already paid a claim for another payout address",
  },
  payment_identifier_conflict: {
    status: 409,
    title: "This payment identifier was used with another request",
  },
  x402_disabled: {
    status: 503,
    title: "x402 payments are switched off on this deployment",
    detail: "Pay with a claim instead: POST /api/claims.",
  },
} as const satisfies Record<string, ProblemReason>;

export type ProblemCode = keyof typeof PROBLEM_REASONS;

/** Why a transaction cannot be attached to a claim (`tx_not_qualifying`'s `reason`). */
export const NOT_QUALIFYING_REASONS = {
  tx_reverted: "The transaction reverted; it moved no USDC.",
  no_transfer_to_pay_to: "The transaction has no USDC transfer to pay_to.",
  below_price: "The transfer is below the price of 10 USDC; it earns nothing and is not refunded.",
  not_amount_due_nor_from_payout_address:
    "The transfer neither equals the claim's amount_due nor comes from its payout address.",
  sender_has_open_claim:
    "The transfer comes from the payout address of another open claim: it pays that claim. To give it to this claim, attach it with the sender's signature over this claim's id.",
  signature_not_from_sender:
    "The signature is not the transfer sender's EIP-191 signature over this claim's id.",
  not_mined_to_sign:
    "A signed attach needs the transfer mined (its sender is read from the chain): attach it again once it is mined.",
  replacement_not_mined:
    "The claim already names a transaction; another one replaces it only once it is mined and qualifies.",
} as const;

export type NotQualifyingReason = keyof typeof NOT_QUALIFYING_REASONS;

/** Why a confirmed transfer to pay_to paid no claim (GET /api/payments/{tx_hash}). */
export const UNMATCHED_REASONS = {
  below_price: "Below the price of 10 USDC: it earns nothing and is not refunded.",
  claim_expired: "The claim it would have paid had expired when it was mined. Not refunded.",
  claim_already_paid: "The claim it would have paid was already paid by another transfer.",
  not_the_verified_authorization:
    "It used the EIP-3009 nonce of an x402 payment, but it is not the authorization the service verified (another value): it pays nothing and is not refunded; the x402 payment it spent the nonce of fails.",
  no_matching_claim:
    "No open claim matched it (wrong amount, another sender, or no claim). Attach its hash to a claim if it qualifies.",
} as const;

export type UnmatchedReason = keyof typeof UNMATCHED_REASONS;

/** Why an x402 payment was refused (`payment_refused`'s `reason`). */
export const PAYMENT_REFUSAL_REASONS = {
  invalid_payment_header:
    "The PAYMENT-SIGNATURE header is not base64 JSON of an x402 payment payload.",
  unsupported_x402_version: "Only x402 version 2 is accepted.",
  unsupported_payload:
    "Only an EIP-3009 transferWithAuthorization payload (scheme exact) is accepted.",
  scheme_mismatch: "The payment is not for scheme exact.",
  network_mismatch: "The payment is not for the network this service is paid on.",
  asset_mismatch: "The payment is not in USDC at the contract this service names.",
  amount_mismatch: "The payment is not for exactly 10 USDC (10000000 atomic units).",
  pay_to_mismatch: "The payment does not go to this service's pay_to address.",
  requirements_mismatch:
    "The payment does not accept the payment requirements this service offers.",
  authorization_expired: "The authorization has expired (validBefore is past or too near).",
  authorization_not_yet_valid: "The authorization is not valid yet (validAfter is in the future).",
  insufficient_balance: "The payer's USDC balance is below 10 USDC.",
  invalid_signature: "The signature does not match the authorization and the payer.",
  nonce_already_used: "This authorization (its nonce) was already used for another payment.",
  settlement_failed: "The payment could not be settled on chain; nothing was paid out.",
  payout_recipient_blacklisted:
    "USDC refuses transfers to this payout address (the token blacklists it): nothing was charged and nothing paid out. Use another payout address.",
  payment_invalid: "The facilitator refused the payment.",
  invalid_payment_identifier:
    "The payment-identifier extension's id must be 16 to 128 letters, digits, hyphens or underscores.",
} as const;

export type PaymentRefusalReason = keyof typeof PAYMENT_REFUSAL_REASONS;

/** What a receipt verification found (POST /api/receipts/verify's `reason`). */
export const RECEIPT_VERDICT_REASONS = {
  ok: "Signed by this service's receipt key, and the receipt on record for its claim.",
  bad_signature: "The signature cannot be read or does not fit the message.",
  signed_by_another_key: "Signed, but not by this service's receipt key.",
  not_a_receipt: "Signed by this service's key, but the message is not a receipt.",
  unknown_claim: "Signed by this service's key, but no completed claim has this receipt.",
  superseded_or_altered: "Signed by this service's key, but not the receipt on record.",
  payout_undone:
    "Signed by this service's key, but withdrawn: a reorganisation undid the payout it names (mined again, it reverted). The claim is paid by a new payout and gets a new receipt.",
} as const;

export type ReceiptVerdictReason = keyof typeof RECEIPT_VERDICT_REASONS;

/** What the chain holds now of a transaction a receipt names (the verdict's `chain` states). */
export const TRANSACTION_STATE_WORDS = {
  on_chain: "Mined, and successful.",
  reverted: "Mined, but it reverted: it moved nothing.",
  not_found: "Not on the chain: never mined, or taken away by a reorganisation.",
  unknown: "Cannot be checked right now: the chain's RPC did not answer.",
} as const;

/** Why a claim failed (its `failure_reason`). */
export const CLAIM_FAILURE_REASONS = {
  payout_reverted: "The payout transaction reverted on chain; it is never sent again.",
  x402_settlement_failed: "The x402 payment could not be settled; nothing was paid or paid out.",
} as const;

/** How an attached transaction stands (POST /api/claims/{id}/tx's `state`), in words. */
export const ATTACHED_STATES = {
  matched: "It has paid the claim; the 1 USDC payout follows.",
  awaiting_confirmations:
    "It qualifies; it pays the claim once it has enough confirmations on top of it.",
  not_mined_yet:
    "It is not mined yet; it pays the claim once it is mined and confirmed, if it qualifies.",
} as const;

/**
 * The mail flow's answers that are not a use-case's refusal (`app.mail_messages.outcome`): why
 * a message got a help reply instead of a claim, or no reply at all. The first six are
 * answered (once); the others never, so no mail can loop and no stranger is mailed.
 */
export const MAIL_REASONS = {
  no_address:
    "No payout address was found in your message. Write the address that should receive the " +
    "1 USDC payout (0x followed by 40 hexadecimal digits) in the subject or the body; nothing " +
    "else is needed.",
  two_addresses:
    "More than one payout address was found in your message, so none was used. Send one " +
    "message per payout address, with only that address in it.",
  two_tx_hashes:
    "More than one transaction hash was found in your message, so none was used. Name one " +
    "transaction (0x followed by 64 hexadecimal digits) per message.",
  too_large:
    "Your message is larger than this service reads. Send a short plain-text message with the " +
    "payout address; attachments are never read.",
  unreadable:
    "Your message could not be read (its MIME structure is broken). Send a short plain-text " +
    "message with the payout address.",
  payout_address_fixed:
    "A claim's payout address is fixed when the claim is created; an address in a reply " +
    "changes nothing. To be paid to another address, write a new message (not a reply).",
  automatic:
    "An automatic message (auto-reply, bounce, mailing list or bulk mail): never answered.",
  own_message: "One of this service's own messages came back: never answered.",
  no_sender: "The message has no usable From address to answer.",
  unauthenticated:
    "The sender did not pass DMARC (nor aligned SPF or DKIM): never answered, so a forged " +
    "From cannot make the service mail a stranger.",
  header_trick:
    "The header block holds control characters or more than one From field, which mail " +
    "programs read differently: never answered.",
  sender_mismatch:
    "The From that passed DMARC is not the From that would be answered (the message reads " +
    "differently to different parsers): never answered.",
  auth_timeout:
    "The sender's DNS did not answer the DKIM, SPF and DMARC checks within MAIL_AUTH_DEADLINE_MS, " +
    "on several tries: never answered.",
  rate_limited:
    "Too many replies to this sender, its domain, or overall: the message waited for room " +
    "longer than MAIL_REPLY_MAX_DELAY_HOURS and is not answered.",
  too_late:
    "The message could not be answered within MAIL_REPLY_MAX_DELAY_HOURS of its arrival (the " +
    "service was down or behind): an answer that late is not sent.",
  headers_too_large: "The header block is too large to read: not answered.",
  processing_failed: "The message could not be processed after several attempts (logged).",
} as const;

export type MailReason = keyof typeof MAIL_REASONS;

/** Why GET /api/health is not `ok`. The first three make it `down`, the rest `degraded`. */
export const HEALTH_REASONS = {
  database_unreachable: "The database does not answer.",
  rpc_unreachable: "The chain's RPC does not answer.",
  rpc_wrong_chain: "The RPC serves another chain than CHAIN_ID.",
  indexer_not_ready: "The indexer has not finished its backfill.",
  indexer_behind: "The indexer trails the chain's head by more than INDEXER_MAX_LAG_BLOCKS.",
  payout_wallet_low_usdc: "The payout wallet cannot pay the next payout's USDC.",
  payout_wallet_low_eth: "The payout wallet cannot pay the next payout's gas.",
  settle_and_pay_not_deployed:
    "SETTLE_AND_PAY_ADDRESS does not hold SettleAndPay's code: x402 payments settle first and are paid out after, in two transactions.",
  matcher_behind:
    "A confirmed payment has waited for the matcher longer than HEALTH_MATCHER_BACKLOG_SECONDS.",
  rpc_logs_incomplete:
    "In the last hour the RPC answered eth_getLogs without a transfer that the block's receipts have (an answer cut short without an error); the matcher read receipts instead. Check the provider.",
  payouts_waiting:
    "A paid claim has waited for its payout longer than HEALTH_PAYOUT_BACKLOG_SECONDS.",
  payouts_unconfirmed:
    "A signed payout has not been mined for longer than HEALTH_PAYOUT_BACKLOG_SECONDS.",
  payout_nonce_taken:
    "A foreign transaction used a payout's nonce: the claim waits for a person (pay-and-earn reissue-payout).",
  payout_wallet_foreign_transfer:
    "The payout wallet sent USDC that is none of the service's payouts: someone else uses its key.",
  x402_settlement_lost:
    "An x402 settlement dropped out of the chain and could not be settled again; its payout went out.",
  payout_without_payment:
    "A claim's payout is signed or mined, but a reorg deeper than CONFIRMATIONS took its payment away: the chain no longer holds it at depth.",
  claim_paid_twice:
    "The chain holds more than one payout transfer for one claim (a reorg mined an abandoned or replaced payout after all).",
  payout_missing_on_chain:
    "A final payout's transfer is no longer on the chain (a reorg deeper than PAYOUT_CONFIRMATIONS mined it again as reverted, or another transaction took its nonce): its claim shows completed and the payer was not paid.",
  attention_unreadable:
    "The counts of what waits for a person (payout_nonce_taken, x402_settlement_lost, payout_wallet_foreign_transfer, payout_without_payment, claim_paid_twice) could not be read within the health check's time: none of them can be trusted to be zero.",
  amount_space_scarce:
    "Variant A: more than AMOUNT_SPACE_WARN_RATIO of the unique amounts are held; when none is free, new claims open without one (paid from their payout address or by a named transaction).",
  mail_intake_down:
    "The mail intake (SMTP listener or IMAP poll) has given no sign of life for longer than MAIL_HEALTH_INTAKE_SECONDS.",
  mail_outbox_behind: "A mail has waited in the outbox for longer than MAIL_HEALTH_OUTBOX_SECONDS.",
  mail_outbox_failed: "A mail failed for good (after its last attempt) in the last 24 hours.",
} as const;

/** The health reasons that mean a person must look (counted by /metrics' needing_attention). */
export const ATTENTION_REASONS = [
  "payout_nonce_taken",
  "payout_wallet_foreign_transfer",
  "x402_settlement_lost",
  "payout_without_payment",
  "claim_paid_twice",
  "payout_missing_on_chain",
] as const satisfies readonly HealthReason[];

export type HealthReason = keyof typeof HEALTH_REASONS;

export const DOWN_HEALTH_REASONS: ReadonlySet<HealthReason> = new Set([
  "database_unreachable",
  "rpc_unreachable",
  "rpc_wrong_chain",
]);

/** Keys of a words table, as a non-empty tuple for `z.enum`. */
export function codesOf<Table extends Record<string, string>>(
  table: Table,
): [keyof Table & string, ...(keyof Table & string)[]] {
  return Object.keys(table) as [keyof Table & string, ...(keyof Table & string)[]];
}
