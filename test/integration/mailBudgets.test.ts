import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../../api/service.ts";
import { sendToIntake, type TestMailCatcher } from "../support/mail.ts";
import { type MailService, startMailService } from "../support/mailService.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Reply budgets per address, per organizational domain and overall: a message over a budget
 * waits until a reply leaves the hour's window, then is answered; one domain cannot use up the
 * replies of everyone else; and no answer goes out later than MAIL_REPLY_MAX_DELAY_HOURS after
 * its message came. Real SMTP intake and catcher; sender checks off (mailSafety tests them), so
 * any From is answered. Time passing is the rows' times moved back.
 */

const INTAKE = "earn@pay-and-earn.test";
const PER_ADDRESS = 2;
const PER_DOMAIN = 3;
const OVERALL = 8;
const MAX_DELAY_HOURS = 24;

let catcher: TestMailCatcher;
let service: RunningService;
let mail: MailService;

beforeAll(async () => {
  mail = await startMailService({
    MAIL_INTAKE_ADDRESS: INTAKE,
    MAIL_REQUIRE_AUTH: "false",
    MAIL_REPLIES_PER_SENDER_PER_HOUR: String(PER_ADDRESS),
    MAIL_REPLIES_PER_DOMAIN_PER_HOUR: String(PER_DOMAIN),
    MAIL_REPLIES_PER_HOUR: String(OVERALL),
    MAIL_REPLY_MAX_DELAY_HOURS: String(MAX_DELAY_HOURS),
  });
  ({ catcher, service } = mail);
});

afterAll(async () => {
  await mail?.stop();
});

interface Row {
  status: string;
  outcome: string | null;
  last_error: string | null;
  waits_seconds: number;
}

async function rowOf(messageId: string): Promise<Row | undefined> {
  const [row] = await service.sql<Row[]>`
    select status, outcome, last_error,
      extract(epoch from next_attempt_at - now())::float8 as waits_seconds
    from app.mail_messages where message_id = ${messageId}`;
  return row;
}

async function send(from: string): Promise<string> {
  const sent = await sendToIntake(service.smtpIntake?.port ?? 0, {
    from,
    to: INTAKE,
    subject: "hello",
    text: "no address here",
  });
  return sent.messageId;
}

/** Waits until the message is answered (processed) or put off by a budget; returns its row. */
async function settled(messageId: string): Promise<Row> {
  return waitFor(async () => {
    const row = await rowOf(messageId);
    return row && (row.status !== "received" || row.outcome === "rate_limited") && row;
  });
}

async function outboxOf(messageId: string) {
  const [row] = await service.sql<
    { status: string; attempts: number; last_error: string | null }[]
  >`
    select status, attempts, last_error from app.outbox where in_reply_to = ${messageId}`;
  return row;
}

async function outboxEmpty() {
  await waitFor(
    async () => (await service.sql`select 1 from app.outbox where status = 'pending'`).length === 0,
    { what: "the outbox to be empty" },
  );
}

/** Waits until the message is answered. */
async function answered(messageId: string): Promise<Row> {
  return waitFor(async () => {
    const row = await rowOf(messageId);
    return row?.status === "processed" && row;
  });
}

/** An hour passes for the budgets: every reply so far leaves the window; waiting mail is due. */
async function anHourLater() {
  await service.sql`update app.outbox set created_at = created_at - interval '1 hour'`;
  await service.sql`
    update app.mail_messages set next_attempt_at = now() where status = 'received'`;
}

describe("reply budgets delay, never drop", () => {
  it(`answers one address ${PER_ADDRESS} times an hour; the next waits, then is answered`, async () => {
    const from = "chatty@one.test";
    const ids: string[] = [];
    for (let index = 0; index <= PER_ADDRESS; index += 1) ids.push(await send(from));
    const rows = [];
    for (const id of ids) rows.push(await settled(id));
    expect(rows.map((row) => [row.status, row.outcome])).toEqual([
      ...Array(PER_ADDRESS).fill(["processed", "no_address"]),
      ["received", "rate_limited"],
    ]);
    const waiting = rows.at(-1) as Row;
    expect(waiting.last_error).toMatch(/per address 2\/2/);
    // It waits until the oldest reply leaves the hour, not forever and not at once.
    expect(waiting.waits_seconds).toBeGreaterThan(3_500);
    expect(waiting.waits_seconds).toBeLessThanOrEqual(3_601);
    await catcher.waitFor(from, PER_ADDRESS);

    await anHourLater();
    expect(await answered(ids.at(-1) as string)).toMatchObject({ outcome: "no_address" });
    await catcher.waitFor(from, PER_ADDRESS + 1);
  });

  it(`answers one organizational domain ${PER_DOMAIN} times an hour, and others meanwhile`, async () => {
    await anHourLater();
    const busy = ["a@busy.test", "b@mail.busy.test", "c@busy.test", "d@lists.busy.test"];
    const ids: string[] = [];
    for (const from of busy) ids.push(await send(from));
    const rows = [];
    for (const id of ids) rows.push(await settled(id));
    expect(rows.map((row) => row.outcome)).toEqual([
      ...Array(PER_DOMAIN).fill("no_address"),
      "rate_limited",
    ]);
    expect(rows.at(-1)?.last_error).toMatch(/per domain \(busy\.test\) 3\/3/);
    expect(catcher.to("d@lists.busy.test")).toEqual([]);
    // Another domain is answered while busy.test waits.
    const other = await send("someone@quiet.test");
    expect(await settled(other)).toMatchObject({ status: "processed", outcome: "no_address" });
    await catcher.waitFor("someone@quiet.test");
  });

  it(`answers ${OVERALL} an hour overall; the rest wait and are answered later`, async () => {
    await anHourLater();
    const ids: string[] = [];
    for (let index = 0; index <= OVERALL; index += 1) ids.push(await send(`p@crowd${index}.test`));
    const rows = [];
    for (const id of ids) rows.push(await settled(id));
    // The waiting busy.test message from before took one reply when the hour passed.
    const processed = rows.filter((row) => row.status === "processed").length;
    expect(processed).toBe(OVERALL - 1);
    expect(rows.slice(processed).every((row) => row.outcome === "rate_limited")).toBe(true);
    expect(rows.at(-1)?.last_error).toMatch(/overall 8\/8/);
    await anHourLater();
    for (const id of ids) expect(await answered(id)).toMatchObject({ outcome: "no_address" });
  });
});

describe(`no answer later than MAIL_REPLY_MAX_DELAY_HOURS (${MAX_DELAY_HOURS})`, () => {
  /** The message came `hours` ago (its row's time moved back). */
  async function cameHoursAgo(messageId: string, hours: number) {
    await service.sql`
      update app.mail_messages
      set received_at = received_at - ${hours} * interval '1 hour'
      where message_id = ${messageId}`;
  }

  /** Sends from `from` until a message waits for the per-address budget; returns its id. */
  async function waitingMessage(from: string): Promise<string> {
    await anHourLater();
    for (let index = 0; index < PER_ADDRESS; index += 1) await answered(await send(from));
    const id = await send(from);
    expect(await settled(id)).toMatchObject({ status: "received", outcome: "rate_limited" });
    return id;
  }

  /** The message is refused with `outcome`, and `from` got only the budget's replies. */
  async function refusedUnanswered(id: string, from: string, outcome: string) {
    const row = await waitFor(async () => {
      const found = await rowOf(id);
      return found?.status !== "received" && found;
    });
    expect(row).toMatchObject({ status: "rejected", outcome });
    await outboxEmpty();
    expect(catcher.to(from)).toHaveLength(PER_ADDRESS);
  }

  it("a message that waited for a budget past it is refused once there is room, not answered late", async () => {
    const from = "late@one.test";
    const id = await waitingMessage(from);
    await cameHoursAgo(id, MAX_DELAY_HOURS + 1);
    await anHourLater();
    await refusedUnanswered(id, from, "too_late");
  });

  it("a message whose wait for a budget would end past it is refused", async () => {
    const from = "later@one.test";
    const id = await waitingMessage(from);
    // It came almost the whole delay ago: the budget's hour would end past it.
    await cameHoursAgo(id, MAX_DELAY_HOURS - 0.5);
    await service.sql`update app.mail_messages set next_attempt_at = now() where message_id = ${id}`;
    await refusedUnanswered(id, from, "rate_limited");
  });

  it("an answer held in the outbox past it (the SMTP server was down) is failed with the reason, never sent", async () => {
    await anHourLater();
    const from = "unlucky@one.test";
    await catcher.stop();
    let down = true;
    try {
      const id = await send(from);
      expect(await answered(id)).toMatchObject({ outcome: "no_address" });
      // The answer is queued and its first try failed: the SMTP server is down.
      await waitFor(async () => (await outboxOf(id))?.attempts);
      await cameHoursAgo(id, MAX_DELAY_HOURS + 1);
      await service.sql`update app.outbox set next_attempt_at = now() where in_reply_to = ${id}`;
      await catcher.start();
      down = false;
      const failed = await waitFor(async () => {
        const row = await outboxOf(id);
        return row?.status === "failed" && row;
      });
      expect(failed.last_error).toMatch(/too late.*MAIL_REPLY_MAX_DELAY_HOURS/);
    } finally {
      if (down) await catcher.start();
    }
    expect(catcher.to(from)).toEqual([]);
  });
});
