/**
 * Why the mail intake failed, as a stable reason code for `/api/health` (`mail.intake.last_error`):
 * the server's own words (which can name hosts, accounts and folders) go to the log only.
 */
export type IntakeErrorReason =
  | "mail_auth_failed"
  | "mail_server_unreachable"
  | "mail_tls_failed"
  | "mail_mailbox_missing"
  | "mail_connection_closed"
  | "mail_intake_failed";

const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNRESET",
  "EPIPE",
]);

export function intakeErrorReason(error: unknown): IntakeErrorReason {
  const fields = (error ?? {}) as {
    authenticationFailed?: boolean;
    code?: unknown;
    serverResponseCode?: unknown;
    message?: unknown;
  };
  const code = typeof fields.code === "string" ? fields.code : "";
  const message = typeof fields.message === "string" ? fields.message : "";
  if (fields.authenticationFailed || fields.serverResponseCode === "AUTHENTICATIONFAILED") {
    return "mail_auth_failed";
  }
  if (UNREACHABLE.has(code)) return "mail_server_unreachable";
  if (/^ERR_(TLS|SSL)|CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return "mail_tls_failed";
  if (
    fields.serverResponseCode === "NONEXISTENT" ||
    /mailbox.*(not exist|not found)/i.test(message)
  ) {
    return "mail_mailbox_missing";
  }
  if (/closed the connection|connection not available|socket (hang up|closed)/i.test(message)) {
    return "mail_connection_closed";
  }
  return "mail_intake_failed";
}
