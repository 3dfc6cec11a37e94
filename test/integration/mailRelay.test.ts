import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../../api/service.ts";
import { sendToIntake, type TestMailCatcher } from "../support/mail.ts";
import { type MailService, startMailService, zoneResolver } from "../support/mailService.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * MAIL_TRUST_RECEIVED believes the top Received header only on connections from
 * MAIL_TRUSTED_RELAYS. The relay here is 127.0.0.2 (the client binds to it), a stranger
 * connects from 127.0.0.1; both send a message from bank.test, whose SPF allows only
 * 192.0.2.1, with a top Received header naming 192.0.2.1. Real SMTP intake and catcher.
 */

const INTAKE = "earn@pay-and-earn.test";
const RELAY = "127.0.0.2";
const zone: Record<string, Record<string, string[][]>> = {
  "bank.test": { TXT: [["v=spf1 ip4:192.0.2.1 -all"]] },
  "_dmarc.bank.test": { TXT: [["v=DMARC1; p=reject"]] },
};

let catcher: TestMailCatcher;
let service: RunningService;
let mail: MailService;

beforeAll(async () => {
  mail = await startMailService(
    {
      MAIL_INTAKE_ADDRESS: INTAKE,
      MAIL_REQUIRE_AUTH: "true",
      MAIL_TRUST_RECEIVED: "true",
      MAIL_TRUSTED_RELAYS: `${RELAY}/32`,
    },
    zoneResolver(zone),
  );
  ({ catcher, service } = mail);
});

afterAll(async () => {
  await mail?.stop();
});

function viaBankMx(from: string, id: string): string {
  return [
    `Received: from mx.bank.test (mx.bank.test [192.0.2.1]) by relay.pay-and-earn.test with ESMTP; ${new Date().toUTCString()}`,
    `From: ${from}`,
    `To: ${INTAKE}`,
    "Subject: hello",
    `Message-ID: ${id}`,
    "",
    "no address here",
    "",
  ].join("\r\n");
}

async function outcome(messageId: string): Promise<{ status: string; outcome: string }> {
  return waitFor(async () => {
    const [row] = await service.sql<{ status: string; outcome: string }[]>`
      select status, outcome from app.mail_messages where message_id = ${messageId}`;
    return row && row.status !== "received" && row;
  });
}

describe("MAIL_TRUST_RECEIVED with MAIL_TRUSTED_RELAYS", () => {
  it("a stranger's forged Received header is not believed: no answer", async () => {
    const from = "ceo@bank.test";
    const id = "<forged-received@stranger.test>";
    await sendToIntake(service.smtpIntake?.port ?? 0, {
      envelope: { from, to: [INTAKE] },
      raw: viaBankMx(from, id),
    });
    expect(await outcome(id)).toMatchObject({ status: "rejected", outcome: "unauthenticated" });
    expect(catcher.to(from)).toEqual([]);
  });

  it("the same header from the configured relay is believed: answered", async () => {
    const from = "clerk@bank.test";
    const id = "<via-relay@bank.test>";
    await sendToIntake(
      service.smtpIntake?.port ?? 0,
      { envelope: { from, to: [INTAKE] }, raw: viaBankMx(from, id) },
      { localAddress: RELAY },
    );
    expect(await outcome(id)).toMatchObject({ status: "processed", outcome: "no_address" });
    expect(await catcher.waitFor(from)).toHaveLength(1);
  });
});
