import { privateKeyToAccount } from "viem/accounts";
import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { readAttentionBothWays } from "../../api/health/readAttention.ts";
import { readOutboxStatus } from "../../api/mailbox/mailStatus.ts";
import { ATTENTION_REASONS, HEALTH_REASONS } from "../../api/reasons/reasonCatalog.ts";
import { healthResponse } from "../../api/schemas/health.ts";
import { offerResponse } from "../../api/schemas/responses.ts";
import { reasonOfError } from "../errors.ts";
import { checkReceiptOffline } from "../receiptCheck.ts";
import type { Finding } from "./doctorFindings.ts";
import * as outcome from "./doctorFindings.ts";
import type { OperatorConnections } from "./operatorContext.ts";

/** The receipt key signs, and what it signs checks out as the receipts' signer. */
export async function checkReceiptKey(config: ServiceConfig): Promise<Finding[]> {
  const account = privateKeyToAccount(config.receipts.privateKey);
  const message = `pay-and-earn receipt\nClaim: doctor-${Date.now()}`;
  const signature = await account.signMessage({ message });
  const check = await checkReceiptOffline({ message, signature }, config.receipts.signer);
  if (!check.valid) {
    return [
      outcome.fail(
        "receipt key",
        `a test signature does not verify (${check.reason})`,
        "check RECEIPT_SIGNER_PRIVATE_KEY",
      ),
    ];
  }
  return [
    outcome.ok(
      "receipt key",
      `signs as ${config.receipts.signer} (published in the offer as receipt_signer), separate from the payout key`,
    ),
  ];
}

export async function checkMail(
  config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  const { mail } = config;
  const intake =
    mail.intake === "off" ? "intake off" : `intake ${mail.intake} for ${mail.intakeAddress}`;
  const findings: Finding[] = [];
  if (!mail.smtpUrl) {
    findings.push(
      outcome.warn(
        "mail",
        `${intake}; SMTP_URL is unset: receipt mails wait in the outbox`,
        "set SMTP_URL (and DKIM_PRIVATE_KEY, DKIM_SELECTOR) to send them",
      ),
    );
  } else if (!mail.dkim) {
    findings.push(
      outcome.warn(
        "mail",
        `${intake}; sending without DKIM: receivers may file the mails as spam`,
        "set DKIM_PRIVATE_KEY and DKIM_SELECTOR",
      ),
    );
  } else {
    findings.push(
      outcome.ok(
        "mail",
        `${intake}; sending from ${mail.from}, DKIM selector ${mail.dkim.keySelector}`,
      ),
    );
  }
  const outbox = await readOutboxStatus(sql).catch(() => null);
  if (outbox && outbox.failedLastDay > 0) {
    findings.push(
      outcome.warn(
        "mail outbox",
        `${outbox.failedLastDay} mails failed for good in the last 24 hours`,
        "look at app.outbox's last_error",
      ),
    );
  }
  return findings;
}

/**
 * What waits for a person, read whole (within the CLI's statement timeout, not health's 2 s),
 * and compared with health's read past the attention check's marks
 * (docs/operating.md#attention-checked-through), both in one snapshot: they differ only when a
 * mark passed what still needs attention. A read that fails is said, never dropped.
 */
export async function checkAttention(
  config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  const read = await readAttentionBothWays(sql, {
    chainId: config.chain.chainId,
    confirmations: config.chain.confirmations,
  }).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  if (read instanceof Error) {
    // Said, not dropped: a doctor that stays silent here would read as "nothing waits".
    return [
      outcome.warn(
        "attention check",
        `what waits for a person could not be read: ${read.message}`,
        "run doctor again; if it recurs, read the attention lists by hand (docs/operating.md#attention-checked-through)",
      ),
    ];
  }
  const { marked, everyRow } = read;
  const findings: Finding[] = [];
  const differing = ATTENTION_REASONS.filter((reason) => marked[reason] !== everyRow[reason]);
  if (differing.length > 0) {
    findings.push(
      outcome.warn(
        "attention check",
        `health's counts past the marks differ from a read of every row: ${differing
          .map((reason) => `${reason} ${marked[reason]}, every row ${everyRow[reason]}`)
          .join("; ")}`,
        "empty app.attention_checked so the attention check starts again (docs/operating.md#attention-checked-through), and report it",
      ),
    );
  }
  const waiting = ATTENTION_REASONS.filter((reason) => everyRow[reason] > 0);
  if (waiting.length === 0) {
    return [...findings, outcome.ok("attention", "nothing waits for a person")];
  }
  return [
    ...findings,
    ...waiting.map((reason) =>
      outcome.warn(
        "attention",
        `${everyRow[reason]} × ${reason}: ${HEALTH_REASONS[reason]}`,
        "pay-and-earn payouts --stuck lists them",
      ),
    ),
  ];
}

/**
 * The service at PUBLIC_URL, as its clients see it: its own health verdict, and the receipt
 * signer its offer publishes, which must be this configuration's (else receipts it signs and
 * receipts clients check against the offer disagree).
 */
export async function checkRunningService(config: ServiceConfig): Promise<Finding[]> {
  const base = config.http.publicUrl;
  const read = async (path: string) => {
    const response = await fetch(`${base}${path}`, {
      headers: { accept: "application/json" },
      signal: AbortSignal.timeout(outcome.CHECK_TIMEOUT_MS),
    });
    return { status: response.status, body: (await response.json()) as unknown };
  };
  let health: { status: number; body: unknown };
  let info: { status: number; body: unknown };
  try {
    [health, info] = await Promise.all([read("/api/health"), read("/api/info")]);
  } catch (error) {
    return [
      outcome.warn(
        "service",
        `${base} does not answer: ${reasonOfError(error)}`,
        "start the service, or set PUBLIC_URL to where it runs",
      ),
    ];
  }
  const report = healthResponse.safeParse(health.body);
  const offer = offerResponse.safeParse(info.body);
  if (!report.success || !offer.success) {
    return [
      outcome.warn(
        "service",
        `${base} answers, but not as pay-and-earn of this version`,
        "check PUBLIC_URL",
      ),
    ];
  }
  const findings: Finding[] = [];
  if (offer.data.receipt_signer !== config.receipts.signer) {
    findings.push(
      outcome.fail(
        "service",
        `${base} publishes receipt signer ${offer.data.receipt_signer}, this configuration signs as ${config.receipts.signer}`,
        "run doctor with the service's own environment, or fix RECEIPT_SIGNER_PRIVATE_KEY where they differ",
      ),
    );
  }
  const { status, reasons } = report.data;
  if (status === "ok") findings.push(outcome.ok("service", `${base} says ok`));
  else {
    const words = reasons.map((reason) => `${reason} (${HEALTH_REASONS[reason]})`).join("; ");
    findings.push(
      (status === "down" ? outcome.fail : outcome.warn)(
        "service",
        `${base} says ${status}: ${words}`,
        "see the checks above and GET /api/health",
      ),
    );
  }
  return findings;
}
