import type { PayloadRefusal } from "./paymentPayload.ts";

/**
 * Our stable reason codes for a refused x402 payment, from our own checks or from the
 * facilitator's (longer, scheme-specific) reason strings, with words for people.
 */
export type RefusalCode =
  | PayloadRefusal
  | "authorization_expired"
  | "authorization_not_yet_valid"
  | "insufficient_balance"
  | "invalid_signature"
  | "nonce_already_used"
  | "settlement_failed"
  | "payment_invalid";

const FACILITATOR_REASONS: Record<string, RefusalCode> = {
  invalid_exact_evm_payload_authorization_valid_before: "authorization_expired",
  invalid_exact_evm_payload_authorization_valid_after: "authorization_not_yet_valid",
  invalid_exact_evm_insufficient_balance: "insufficient_balance",
  invalid_exact_evm_signature: "invalid_signature",
  invalid_exact_evm_failed_to_parse_signature: "invalid_signature",
  invalid_exact_evm_nonce_already_used: "nonce_already_used",
  invalid_exact_evm_payload_authorization_value_mismatch: "amount_mismatch",
  invalid_exact_evm_recipient_mismatch: "pay_to_mismatch",
  invalid_exact_evm_network_mismatch: "network_mismatch",
  invalid_exact_evm_scheme: "scheme_mismatch",
  invalid_exact_evm_missing_eip712_domain: "requirements_mismatch",
  invalid_exact_evm_token_name_mismatch: "asset_mismatch",
  invalid_exact_evm_token_version_mismatch: "asset_mismatch",
  invalid_exact_evm_transaction_failed: "settlement_failed",
  invalid_exact_evm_transfer_event_mismatch: "settlement_failed",
  settlement_failed: "settlement_failed",
};

const WORDS: Record<RefusalCode, string> = {
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
  payment_invalid: "The facilitator refused the payment.",
};

export function refusalCode(reason: string): RefusalCode {
  if (reason in WORDS) return reason as RefusalCode;
  return FACILITATOR_REASONS[reason] ?? "payment_invalid";
}

export function refusalWords(code: RefusalCode): string {
  return WORDS[code];
}
