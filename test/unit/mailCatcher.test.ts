import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { sendToIntake, startTestMailCatcher, type TestMailCatcher } from "../support/mail.ts";

/**
 * The mail catcher (the devnet's outbound mail server, and the tests') outlives a sender that
 * dies mid-message. Seen in the fault suite's long run: a replica SIGKILLed while it sent a
 * receipt mail reset its connection, smtp-server threw the error from its 'error' event, and
 * the test process died of it (the devnet's process would too).
 */
describe("the mail catcher", () => {
  let catcher: TestMailCatcher | undefined;
  afterEach(async () => {
    await catcher?.stop();
  });

  it("keeps taking mail after a sender resets its connection in the middle of a message", async () => {
    catcher = await startTestMailCatcher();
    const socket = connect(catcher.port, "127.0.0.1");
    socket.on("error", () => {});
    const answers: string[] = [];
    const answered = (code: string) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (answers.join("").includes(code)) {
            socket.off("data", onData);
            answers.length = 0;
            resolve();
          }
        };
        const onData = (chunk: Buffer) => {
          answers.push(chunk.toString("latin1"));
          check();
        };
        socket.on("data", onData);
        check();
      });
    await answered("220");
    socket.write("EHLO sender.test\r\n");
    await answered("250 ");
    socket.write("MAIL FROM:<dying@sender.test>\r\n");
    await answered("250");
    socket.write("RCPT TO:<someone@client.test>\r\n");
    await answered("250");
    socket.write("DATA\r\n");
    await answered("354");
    socket.write("Subject: half a message\r\n\r\nthe sender dies before the end");
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.resetAndDestroy();
    await closed;

    await sendToIntake(catcher.port, {
      from: "alive@sender.test",
      to: "someone@client.test",
      subject: "the next message",
      text: "still taken",
    });
    const [caught] = await catcher.waitFor("someone@client.test");
    expect(caught?.subject).toBe("the next message");
    expect(catcher.caught).toHaveLength(1);
  });
});
