import type { PaymentRefusalReason } from "../reasons/reasonCatalog.ts";
import { PAYMENT_REFUSAL_REASONS } from "../reasons/reasonCatalog.ts";

/**
 * Our stable reason for a refused x402 payment (the catalog's PAYMENT_REFUSAL_REASONS), from
 * our own checks or from the facilitator's longer, scheme-specific reason strings.
 */
const FACILITATOR_REASONS: Record<string, PaymentRefusalReason> = {
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
  // Our own failure reasons, recorded by the matcher, the settlement watcher or an operator's
  // re-issue (lifecycle/x402Records.ts, reissueSettleAndPay.ts): a waiting request or a replay
  // is told what happened to the authorization, not that the facilitator refused it.
  authorization_spent_elsewhere: "nonce_already_used",
  authorization_expired_unsettled: "authorization_expired",
};

export function refusalCode(reason: string): PaymentRefusalReason {
  if (reason in PAYMENT_REFUSAL_REASONS) return reason as PaymentRefusalReason;
  return FACILITATOR_REASONS[reason] ?? "payment_invalid";
}
