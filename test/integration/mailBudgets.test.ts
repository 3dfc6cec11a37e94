import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../../api/service.ts";
import { sendToIntake, type TestMailCatcher } from "../support/mail.ts";
import { type MailService, startMailService } from "../support/mailService.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Reply budgets per address, per organizational domain and overall: a message over a budget
 * waits until a reply leaves the hour's window, then is answered; one domain cannot use up the
 * replies of everyone else. Real SMTP intake and catcher; sender checks off (mailSafety tests
 * them), so any From is answered. The hour passing is the outbox's rows made an hour older.
 */

const INTAKE = "earn@pay-and-earn.test";
const PER_ADDRESS = 2;
const PER_DOMAIN = 3;
const OVERALL = 8;

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
