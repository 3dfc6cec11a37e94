import { describe, expect, it } from "vitest";
import { intakeErrorReason } from "../../api/mail/intakeErrorReason.ts";

/** /api/health names why the mail intake failed with a code, never the server's own words. */
describe("intakeErrorReason", () => {
  it("gives a stable code for each kind of IMAP failure", () => {
    const failure = (message: string, fields: Record<string, unknown> = {}) =>
      Object.assign(new Error(message), fields);
    expect(
      intakeErrorReason(
        failure("Invalid credentials (user bob@x.example)", { authenticationFailed: true }),
      ),
    ).toBe("mail_auth_failed");
    expect(
      intakeErrorReason(failure("connect ECONNREFUSED 10.0.0.5:993", { code: "ECONNREFUSED" })),
    ).toBe("mail_server_unreachable");
    expect(
      intakeErrorReason(
        failure("self-signed certificate", { code: "DEPTH_ZERO_SELF_SIGNED_CERT" }),
      ),
    ).toBe("mail_tls_failed");
    expect(
      intakeErrorReason(
        failure("Mailbox does not exist: Private/Invoices", { serverResponseCode: "NONEXISTENT" }),
      ),
    ).toBe("mail_mailbox_missing");
    expect(intakeErrorReason(new Error("the IMAP server closed the connection"))).toBe(
      "mail_connection_closed",
    );
    expect(intakeErrorReason(new Error("something odd from imap.internal.example"))).toBe(
      "mail_intake_failed",
    );
    expect(intakeErrorReason("a string")).toBe("mail_intake_failed");
    expect(intakeErrorReason(undefined)).toBe("mail_intake_failed");
  });
});
