import type { DNSResolver } from "mailauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../../api/service.ts";
import { WAKE_CHANNELS, wakeWorker } from "../../api/workers/wakeChannels.ts";
import { sendToIntake, type TestMailCatcher } from "../support/mail.ts";
import { type MailService, startMailService } from "../support/mailService.ts";
import { parsePrometheusText, sampleValue } from "../support/prometheusText.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * One message cannot stall the mail for everyone: a message with 600 DKIM signatures whose
 * keys sit behind a nameserver that never answers (here a resolver whose answers never come)
 * is checked within MAIL_AUTH_DEADLINE_MS, outside any database transaction, and put back for
 * a later try, while the next message is answered. Real SMTP intake and catcher, as in
 * mailSafety.test.ts.
 */

const INTAKE = "earn@pay-and-earn.test";
const ADDRESS = "0x976EA74026E726554dB657fA54763abd0C3a0aa9";
const DEADLINE_MS = 1_500;
const MAX_SIGNATURES = 5;
const SIGNATURES = 600;

const zone: Record<string, Record<string, string[][]>> = {
  "trusted.test": { TXT: [["v=spf1 ip4:127.0.0.1 ip6:::1 -all"]] },
};
const silentLookups: string[] = [];
let pendingLookups = 0;
const resolver: DNSResolver = (name, type) => {
  const domain = name.toLowerCase().replace(/\.$/, "");
  if (domain === "slow.test" || domain.endsWith(".slow.test")) {
    // The silent nameserver: the question is asked, no answer ever comes.
    silentLookups.push(`${type} ${domain}`);
    pendingLookups += 1;
    return new Promise(() => {});
  }
  const records = zone[domain]?.[type];
  if (records) return Promise.resolve(records);
  return Promise.reject(
    Object.assign(new Error(`query${type} ENOTFOUND ${name}`), { code: "ENOTFOUND" }),
  );
};

let catcher: TestMailCatcher;
let service: RunningService;
let mail: MailService;

beforeAll(async () => {
  mail = await startMailService(
    {
      MAIL_INTAKE_ADDRESS: INTAKE,
      MAIL_REQUIRE_AUTH: "true",
      MAIL_AUTH_DEADLINE_MS: String(DEADLINE_MS),
      MAIL_DNS_TIMEOUT_MS: "1000",
      MAIL_DKIM_MAX_SIGNATURES: String(MAX_SIGNATURES),
    },
    resolver,
  );
  ({ catcher, service } = mail);
});

afterAll(async () => {
  await mail?.stop();
});

interface Row {
  status: string;
  outcome: string | null;
  attempts: number;
  last_error: string | null;
}

async function row(messageId: string): Promise<Row | undefined> {
  const [found] = await service.sql<Row[]>`
    select status, outcome, attempts, last_error from app.mail_messages
    where message_id = ${messageId}`;
  return found;
}

describe("a message whose DKIM keys never come", () => {
  it("waits for a later try while the next message is answered", async () => {
    const port = service.smtpIntake?.port ?? 0;
    const signatures = Array.from(
      { length: SIGNATURES },
      (_, index) =>
        `DKIM-Signature: v=1; a=rsa-sha256; d=slow.test; s=k${index}; h=from; bh=AA==; b=AA==`,
    ).join("\r\n");
    const slowId = "<six-hundred-signatures@slow.test>";
    await sendToIntake(port, {
      envelope: { from: "x@slow.test", to: [INTAKE] },
      raw: `${signatures}\r\nFrom: x@slow.test\r\nTo: ${INTAKE}\r\nSubject: earn\r\nMessage-ID: ${slowId}\r\n\r\n${ADDRESS}\r\n`,
    });
    // The slow message's check is under way: its lookups wait on the silent nameserver.
    await waitFor(() => pendingLookups > 0, { what: "a lookup at the silent nameserver" });
    const lookupSeen = Date.now();
    // It holds no database transaction open meanwhile. Another worker's transaction may sit
    // idle between two statements for a moment; only one idle since the check began counts.
    await waitFor(() => Date.now() - lookupSeen >= 1_000, { what: "a second into the check" });
    const open = await service.sql<{ state: string }[]>`
      select state from pg_stat_activity
      where datname = current_database() and state like 'idle in transaction%'
        and state_change < now() - interval '800 milliseconds'`;
    expect(open).toEqual([]);

    const from = "next@trusted.test";
    const started = Date.now();
    const sent = await sendToIntake(port, { from, to: INTAKE, subject: "earn", text: ADDRESS });
    const [answer] = await catcher.waitFor(from, 1, 10_000);
    const answeredMs = Date.now() - started;
    expect(answer?.inReplyTo).toBe(sent.messageId);
    // Answered after at most one deadline of the slow message (and its grace), not ~50 min.
    expect(answeredMs).toBeLessThan(DEADLINE_MS + 5_000);

    // The slow message is put back with the reason, neither answered nor lost.
    const slow = await waitFor(async () => {
      const found = await row(slowId);
      return found && found.attempts >= 1 && found;
    });
    expect(slow).toMatchObject({ status: "received", outcome: "auth_timeout" });
    expect(slow.last_error).toMatch(/ran out of time|no verdict within/);
    // The operator sees it wait: one message behind a timed-out sender check, in the queue.
    const metrics = parsePrometheusText(
      await fetch(`${service.url}/metrics`).then((response) => response.text()),
    );
    expect(
      sampleValue(metrics, "pay_and_earn_mail_messages", {
        status: "received",
        outcome: "auth_timeout",
      }),
    ).toBe(1);
    expect(
      sampleValue(metrics, "pay_and_earn_backlog_items", { queue: "mail_inbound" }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sampleValue(metrics, "pay_and_earn_backlog_oldest_seconds", { queue: "mail_inbound" }),
    ).toBeGreaterThanOrEqual(1);
    // Only the topmost signatures were looked at.
    const keys = new Set(silentLookups.filter((lookup) => lookup.includes("._domainkey.")));
    expect(keys.size).toBeLessThanOrEqual(MAX_SIGNATURES);
    expect(catcher.to("x@slow.test")).toEqual([]);
  });

  it("is given up with a reason after its tries, never answered", async () => {
    const slowId = "<six-hundred-signatures@slow.test>";
    const slow = await waitFor(
      async () => {
        // The backoff between tries (2, 4, 8, 16 s) is not what is tested here: each wait is
        // cut short, as if its time had passed, and the processor told.
        const due = await service.sql`
          update app.mail_messages set next_attempt_at = now()
          where message_id = ${slowId} and status = 'received' and next_attempt_at > now()
          returning 1`;
        if (due.length > 0) await wakeWorker(service.sql, WAKE_CHANNELS.mailProcessor);
        const found = await row(slowId);
        return found?.status !== "received" && found;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: "the slow message to be given up" },
    );
    expect(slow).toMatchObject({ status: "rejected", outcome: "auth_timeout", attempts: 5 });
    expect(catcher.to("x@slow.test")).toEqual([]);
  }, 70_000);
});
