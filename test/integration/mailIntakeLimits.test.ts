import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../api/logger.ts";
import { type RunningService, startService } from "../../api/service.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import { sendToIntake, startTestMailCatcher, type TestMailCatcher } from "../support/mail.ts";
import { testServiceConfig } from "../support/service.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The SMTP intake's per-address limits: connections at once, messages begun an hour, and the
 * idle timeout that frees a slot held by a silent client. Clients are raw TCP sockets and
 * nodemailer, each bound to its own 127.0.0.x address so every case has its own IP.
 */

const INTAKE = "earn@pay-and-earn.test";

let catcher: TestMailCatcher;
let setup: ChainWithDatabase;
let service: RunningService;
const sockets: Socket[] = [];

beforeAll(async () => {
  catcher = await startTestMailCatcher();
  setup = await startChainWithDatabase({ migrate: true });
  const config = testServiceConfig(setup.chain, setup.database.url, {
    MAIL_INTAKE: "smtp",
    SMTP_INTAKE_PORT: "0",
    MAIL_INTAKE_ADDRESS: INTAKE,
    SMTP_URL: catcher.url,
    MAIL_REQUIRE_AUTH: "false",
    MAIL_SMTP_CONNECTIONS_PER_IP: "2",
    MAIL_SMTP_MESSAGES_PER_IP_PER_HOUR: "3",
    MAIL_SMTP_SOCKET_TIMEOUT_SECONDS: "1",
    MAIL_SMTP_SESSION_SECONDS: "3",
  });
  service = await startService(config, createLogger(config.logLevel));
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await service?.stop();
  await setup?.stop();
  await catcher?.stop();
});

/** A raw client from `localAddress`: what the server said first, and when it closed. */
function rawClient(localAddress: string) {
  const socket = connect({ host: "127.0.0.1", port: service.smtpIntake?.port ?? 0, localAddress });
  sockets.push(socket);
  let said = "";
  let closed = false;
  socket.on("data", (chunk) => {
    said += chunk.toString();
  });
  socket.on("error", () => {});
  socket.on("close", () => {
    closed = true;
  });
  return {
    greeting: () => waitFor(() => /^\d{3}[ -]/.test(said) && said, { what: "a greeting" }),
    closed: () => closed,
    socket,
  };
}

describe("per-address limits of the SMTP intake", () => {
  it("two connections at once from one address; the third is told to come back (421)", async () => {
    const first = rawClient("127.0.0.11");
    const second = rawClient("127.0.0.11");
    expect(await first.greeting()).toMatch(/^220 /);
    expect(await second.greeting()).toMatch(/^220 /);
    const third = rawClient("127.0.0.11");
    expect(await third.greeting()).toMatch(/^421 /);
    // Another address is not affected.
    expect(await rawClient("127.0.0.12").greeting()).toMatch(/^220 /);
  });

  it("a silent client is dropped after the idle timeout, and its slot is free again", async () => {
    const silent = [rawClient("127.0.0.13"), rawClient("127.0.0.13")];
    for (const client of silent) expect(await client.greeting()).toMatch(/^220 /);
    const started = Date.now();
    await waitFor(() => silent.every((client) => client.closed()), {
      timeoutMs: 10_000,
      what: "the silent clients to be dropped",
    });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await rawClient("127.0.0.13").greeting()).toMatch(/^220 /);
  });

  it("three messages an hour from one address; the fourth is refused at MAIL FROM (450)", async () => {
    const port = service.smtpIntake?.port ?? 0;
    const message = (index: number) => ({
      from: `sender${index}@one.test`,
      to: INTAKE,
      subject: `message ${index}`,
      text: "hello",
    });
    for (let index = 0; index < 3; index += 1) {
      await sendToIntake(port, message(index), { localAddress: "127.0.0.14" });
    }
    await expect(sendToIntake(port, message(3), { localAddress: "127.0.0.14" })).rejects.toThrow(
      /450/,
    );
    const [row] = await service.sql<{ stored: number }[]>`
      select count(*)::int as stored from app.mail_messages where client_ip = '127.0.0.14'`;
    expect(row?.stored).toBe(3);
    await sendToIntake(port, message(4), { localAddress: "127.0.0.15" });
  });

  it("a sender that drips its message is cut off at the session deadline; nothing is stored", async () => {
    const client = rawClient("127.0.0.16");
    expect(await client.greeting()).toMatch(/^220 /);
    const id = "<drip@slow.test>";
    client.socket.write(
      `EHLO slow.test\r\nMAIL FROM:<x@slow.test>\r\nRCPT TO:<${INTAKE}>\r\nDATA\r\nMessage-ID: ${id}\r\n`,
    );
    // One header line every 400 ms: never idle for the 1 s socket timeout.
    const drip = setInterval(() => {
      if (!client.closed()) client.socket.write("X-Drip: 1\r\n");
    }, 400);
    const started = Date.now();
    try {
      await waitFor(() => client.closed(), { timeoutMs: 15_000, what: "the drip to be cut off" });
    } finally {
      clearInterval(drip);
    }
    expect(Date.now() - started).toBeLessThan(6_000);
    const [row] = await service.sql`select 1 from app.mail_messages where message_id = ${id}`;
    expect(row).toBeUndefined();
  });
});
