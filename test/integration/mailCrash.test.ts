import { randomBytes } from "node:crypto";
import { type Address, type Hex, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { CrashPoint } from "../../api/crashHook.ts";
import { startTestImapServer, type TestImapServer } from "../support/dovecot.ts";
import {
  attachedReceipt,
  sendToIntake,
  startTestMailCatcher,
  type TestMailCatcher,
} from "../support/mail.ts";
import { freePort } from "../support/ports.ts";
import { startTestService, testServiceEnv } from "../support/service.ts";
import { type ServiceProcess, startServiceProcess } from "../support/serviceProcess.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The mail parts in a real process (`node api/main.ts`), SIGKILLed where exactly-once is
 * hardest: a message stored but not acted on, a mail claim created but not recorded, a
 * receipt mail taken from the outbox but not handed to the mail server. After a restart each
 * gets exactly one answer, one claim, one receipt mail. (The stack's own service runs the
 * matcher and the payouts, with no mail parts of its own.)
 */

const INTAKE = "earn@pay-and-earn.test";

let catcher: TestMailCatcher;
let stack: Stack;
let dovecot: TestImapServer;
let running: ServiceProcess[] = [];

beforeAll(async () => {
  catcher = await startTestMailCatcher();
  [stack, dovecot] = await Promise.all([startStack(), startTestImapServer()]);
});

afterEach(async () => {
  for (const service of running) await service.stop();
  running = [];
});

afterAll(async () => {
  await stack?.stop();
  await dovecot?.stop();
  await catcher?.stop();
});

async function startMailService(
  ports: { http: number; smtp: number },
  options: { crashAt?: CrashPoint; intake?: "smtp" | "imap" | "off" } = {},
): Promise<ServiceProcess> {
  const service = startServiceProcess(
    testServiceEnv(stack.chain, stack.database.url, {
      PORT: String(ports.http),
      MAIL_INTAKE: options.intake ?? "smtp",
      IMAP_URL: dovecot.url,
      IMAP_POLL_SECONDS: "1",
      SMTP_INTAKE_PORT: String(ports.smtp),
      MAIL_INTAKE_ADDRESS: INTAKE,
      SMTP_URL: catcher.url,
      MAIL_REQUIRE_AUTH: "false",
      // A message a killed processor leased waits out the lease (deadline + 10 s) before it is
      // taken again: short here, so the restart's answer comes within the test's waits.
      MAIL_AUTH_DEADLINE_MS: "2000",
      MAIL_SEND_INTERVAL_MS: "50",
      CONFIRMATIONS: "2",
      ...(options.crashAt ? { CRASH_AT: options.crashAt } : {}),
    }),
  );
  running.push(service);
  await service.answering(`http://127.0.0.1:${ports.http}/api/health`);
  return service;
}

async function expectKilled(service: ServiceProcess) {
  expect(await service.exited, service.output()).toEqual({ code: null, signal: "SIGKILL" });
}

/** Nothing left to do: every stored message acted on, every queued mail sent. */
async function settled() {
  await waitFor(
    async () => {
      const [row] = await stack.service.sql<{ waiting: number }[]>`
        select (select count(*) from app.mail_messages where status = 'received')
          + (select count(*) from app.outbox where status = 'pending') as waiting`;
      return Number(row?.waiting) === 0;
    },
    { what: "the mail queues to be empty" },
  );
}

async function mailClaims(email: string) {
  return stack.service.sql<{ id: string }[]>`
    select id from app.claims where email = ${email} and flow = 'mail'`;
}

function freshAddress(): Address {
  return privateKeyToAccount(generatePrivateKey()).address;
}

describe("the mail flow across a SIGKILL", () => {
  it("between storing a message and answering it: one answer after the restart, and the MTA's retry changes nothing", async () => {
    const ports = { http: await freePort(), smtp: await freePort() };
    const from = `stored-${randomBytes(3).toString("hex")}@client.test`;
    const message = {
      from,
      to: INTAKE,
      subject: "earn",
      text: freshAddress(),
      messageId: `<crash-stored-${randomBytes(4).toString("hex")}@client.test>`,
    };
    const crashing = await startMailService(ports, { crashAt: "after_mail_stored" });
    await expect(sendToIntake(ports.smtp, message)).rejects.toThrow();
    await expectKilled(crashing);
    const [stored] = await stack.service.sql<{ status: string }[]>`
      select status from app.mail_messages where message_id = ${message.messageId}`;
    expect(stored).toEqual({ status: "received" });

    await startMailService(ports);
    // The sending server never got its 250, so it sends the message again.
    await sendToIntake(ports.smtp, message);
    await catcher.waitFor(from);
    await settled();
    expect(catcher.to(from)).toHaveLength(1);
    expect(catcher.to(from)[0]?.inReplyTo).toBe(message.messageId);
    expect(await mailClaims(from)).toHaveLength(1);
  });

  it("IMAP: stored, then killed before flagging: still unseen, taken again, answered once", async () => {
    const ports = { http: await freePort(), smtp: await freePort() };
    const from = `imap-${randomBytes(3).toString("hex")}@client.test`;
    const messageId = `<crash-imap-${randomBytes(4).toString("hex")}@client.test>`;
    const crashing = await startMailService(ports, {
      crashAt: "after_mail_stored",
      intake: "imap",
    });
    await dovecot.deliver(
      `From: ${from}\r\nTo: ${INTAKE}\r\nSubject: earn\r\nMessage-ID: ${messageId}\r\n\r\n${freshAddress()}\r\n`,
    );
    await expectKilled(crashing);
    const [stored] = await stack.service.sql<{ status: string }[]>`
      select status from app.mail_messages where message_id = ${messageId}`;
    expect(stored).toEqual({ status: "received" });
    // Flagged only once stored: the crash came in between, so the mailbox still shows it unseen.
    expect((await dovecot.flagsByMessageId()).get(messageId)).not.toContain("\\Seen");

    await startMailService(ports, { intake: "imap" });
    await catcher.waitFor(from);
    await waitFor(async () =>
      (await dovecot.flagsByMessageId()).get(messageId)?.includes("\\Seen"),
    );
    await settled();
    expect(catcher.to(from)).toHaveLength(1);
    expect(await mailClaims(from)).toHaveLength(1);
  });

  it("between creating the claim and recording it: the same claim is answered, once", async () => {
    const ports = { http: await freePort(), smtp: await freePort() };
    const from = `created-${randomBytes(3).toString("hex")}@client.test`;
    const messageId = `<crash-created-${randomBytes(4).toString("hex")}@client.test>`;
    const crashing = await startMailService(ports, { crashAt: "after_mail_claim_created" });
    // The crash comes after the 250, when the processor acts on the stored message.
    await sendToIntake(ports.smtp, {
      from,
      to: INTAKE,
      subject: "earn",
      text: freshAddress(),
      messageId,
    }).catch(() => {});
    await expectKilled(crashing);
    const [claim, ...others] = await mailClaims(from);
    expect(others).toEqual([]);
    const [message] = await stack.service.sql<{ status: string }[]>`
      select status from app.mail_messages where message_id = ${messageId}`;
    expect(message).toEqual({ status: "received" });

    await startMailService(ports);
    const [answer] = await catcher.waitFor(from);
    await settled();
    expect(catcher.to(from)).toHaveLength(1);
    expect(answer?.text).toContain(claim?.id);
    expect(await mailClaims(from)).toEqual([claim]);
  });

  it("between completing a claim and sending its receipt mail: exactly one receipt mail", async () => {
    const ports = { http: await freePort(), smtp: await freePort() };
    const email = `receipt-${randomBytes(3).toString("hex")}@client.test`;
    const crashing = await startMailService(ports, { crashAt: "before_mail_sent", intake: "off" });
    const claim = await stack.createClaim(freshAddress(), { email });
    await stack.chain.transferUsdc(
      stack.chain.user(0),
      stack.chain.payTo.address,
      atomic(claim.amount_due_usdc),
    );
    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    await expectKilled(crashing);
    const [row] = await stack.service.sql<{ status: string; attempts: number }[]>`
      select status, attempts from app.outbox where claim_id = ${claim.claim_id}`;
    expect(row).toEqual({ status: "pending", attempts: 0 });
    expect(catcher.to(email)).toEqual([]);

    await startMailService(ports, { intake: "off" });
    const [mail] = await catcher.waitFor(email);
    await settled();
    expect(catcher.to(email)).toHaveLength(1);
    const receipt = attachedReceipt(mail as NonNullable<typeof mail>);
    expect(
      await verifyMessage({
        address: receipt.signer as Address,
        message: receipt.message as string,
        signature: receipt.signature as Hex,
      }),
    ).toBe(true);
  });
});

describe("a service starting with its SMTP intake", () => {
  it("answers HTTP from the moment it listens, while the intake's first heartbeat still waits on the database", async () => {
    const ports = { http: await freePort(), smtp: await freePort() };
    // The intake's first heartbeat (app.mail_intake) waits for this row lock. A start that awaits
    // it between the HTTP listen and attaching the request handler leaves every request that
    // arrives meanwhile without an answer, for good (docs/traps.md#node-itself): a supervisor's
    // readiness probe without a time-out then hangs (the fault suite's did, after a SIGKILL).
    const lock = Promise.withResolvers<void>();
    const released = Promise.withResolvers<void>();
    const holding = stack.service.sql.begin(async (transaction) => {
      await transaction`
        insert into app.mail_intake (transport, last_ok_at) values ('smtp', now())
        on conflict (transport) do update set last_ok_at = now()`;
      lock.resolve();
      await released.promise;
    });
    await lock.promise;
    const starting = startTestService(stack.chain, stack.database.url, {
      PORT: String(ports.http),
      MAIL_INTAKE: "smtp",
      SMTP_INTAKE_PORT: String(ports.smtp),
      MAIL_INTAKE_ADDRESS: INTAKE,
      SMTP_URL: catcher.url,
      MAIL_REQUIRE_AUTH: "false",
      // A message a killed processor leased waits out the lease (deadline + 10 s) before it is
      // taken again: short here, so the restart's answer comes within the test's waits.
      MAIL_AUTH_DEADLINE_MS: "2000",
      // The heartbeat waits on the lock for as long as the test holds it.
      DATABASE_LOCK_TIMEOUT_MS: "60000",
    });
    let first: string;
    let waitingHeartbeats: number | undefined;
    try {
      // Every request gets an answer, or is refused before the port listens; none is left open.
      first = await waitFor(
        () =>
          fetch(`http://127.0.0.1:${ports.http}/api/health`, {
            signal: AbortSignal.timeout(3_000),
          }).then(
            (response) => `answered ${response.status}`,
            (error: Error) =>
              (error.cause as { code?: string } | undefined)?.code === "ECONNREFUSED"
                ? undefined
                : `${error.name}: ${error.message}`,
          ),
        { timeoutMs: 30_000, what: `the service on port ${ports.http} to listen` },
      );
      const [row] = await stack.service.sql<{ waiting: number }[]>`
        select count(*)::int as waiting from pg_stat_activity
        where wait_event_type = 'Lock' and query like '%app.mail_intake%'`;
      waitingHeartbeats = row?.waiting;
    } finally {
      released.resolve();
      await holding;
    }
    const service = await starting;
    try {
      expect(first).toMatch(/^answered /);
      // It answered while the heartbeat still waited on the lock: HTTP did not wait for the intake.
      expect(waitingHeartbeats).toBe(1);
      // Once the database answers, the intake takes mail as before.
      const from = `starting-${randomBytes(3).toString("hex")}@client.test`;
      await sendToIntake(ports.smtp, { from, to: INTAKE, subject: "earn", text: freshAddress() });
      await catcher.waitFor(from);
    } finally {
      await service.stop();
    }
  });
});
