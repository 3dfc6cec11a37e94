import { afterEach, describe, expect, it } from "vitest";
import { isAllowedAddress, type Resolve } from "../../api/webhooks/publicAddress.ts";
import { webhookTransport } from "../../api/webhooks/sendWebhook.ts";
import { newWebhookSecret } from "../../api/webhooks/webhookEndpoints.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhookReceiver.ts";

/**
 * The webhook transport against real HTTP receivers on this machine: signatures that the
 * official `standardwebhooks` package verifies, and no SSRF: a name that resolves (now) to a
 * non-public address is refused when the socket connects, whatever it resolved to before;
 * redirects are not followed; a silent receiver times out; a flood of an answer is cut off.
 */

const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.stop()));
});

// Generous: a loaded machine answers late even on loopback; the timeout test sets its own.
const settings = { allowLoopback: true, timeoutMs: 10_000, maxResponseBytes: 1_024 };
const loopbackResolve: Resolve = async () => [{ address: "127.0.0.1", family: 4 }];

function message(secret: string, url: string) {
  const body = JSON.stringify({
    id: "evt_1",
    type: "claim.paid",
    time: new Date().toISOString(),
    data: { claim_id: "clm_x" },
  });
  return { url, secret, messageId: "evt_1", body, attempt: 1, redelivery: false };
}

describe("webhook signatures", () => {
  it("signs so that the standardwebhooks package verifies, and a wrong secret does not", async () => {
    const secret = newWebhookSecret();
    const receiver = await startWebhookReceiver({ secrets: [secret] });
    receivers.push(receiver);
    const transport = webhookTransport(settings, loopbackResolve);
    expect(await transport.send(message(secret, receiver.url))).toEqual({ ok: true, status: 200 });
    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]?.payload.type).toBe("claim.paid");
    const other = await transport.send(message(newWebhookSecret(), receiver.url));
    expect(other.ok).toBe(false);
    expect(receiver.rejected()).toBe(1);
  });
});

describe("no SSRF", () => {
  it("classifies addresses: public unicast only, loopback only when allowed", () => {
    for (const address of [
      "10.0.0.1",
      "172.16.5.4",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "::",
      "fe80::1",
      "fc00::1",
      "::ffff:10.0.0.1",
      "64:ff9b::a00:1",
      "2002:a00:1::",
      "::7f00:1",
      "::a00:1",
      "4000::1",
      "not an address",
    ]) {
      expect(isAllowedAddress(address, true), address).toBe(false);
    }
    for (const address of ["127.0.0.1", "::1", "::ffff:127.0.0.1"]) {
      expect(isAllowedAddress(address, false), address).toBe(false);
      expect(isAllowedAddress(address, true), address).toBe(true);
    }
    for (const address of ["8.8.8.8", "2606:4700:4700::1111"]) {
      expect(isAllowedAddress(address, false), address).toBe(true);
    }
  });

  it("refuses loopback unless allowed, by literal and by name, and sends nothing", async () => {
    const secret = newWebhookSecret();
    const receiver = await startWebhookReceiver({ secrets: [secret] });
    receivers.push(receiver);
    const strict = webhookTransport({ ...settings, allowLoopback: false }, loopbackResolve);
    const literal = await strict.send(message(secret, "https://127.0.0.1/"));
    expect(literal).toMatchObject({
      ok: false,
      error: expect.stringContaining("not a public address"),
    });
    const named = await strict.send(message(secret, "https://hooks.example/"));
    expect(named).toMatchObject({
      ok: false,
      error: expect.stringContaining("not a public address"),
    });
    expect(receiver.requests()).toBe(0);
  });

  it("checks the address the socket connects to: a name that rebinds to a private address is refused", async () => {
    const secret = newWebhookSecret();
    const receiver = await startWebhookReceiver({ secrets: [secret] });
    receivers.push(receiver);
    // Public when first asked (when the URL was registered), loopback when the socket opens.
    const answers = [
      [{ address: "93.184.216.34", family: 4 }],
      [{ address: "127.0.0.1", family: 4 }],
    ];
    let asked = 0;
    const rebinding: Resolve = async () => answers[Math.min(asked++, 1)] ?? [];
    expect(await rebinding("hooks.example")).toEqual(answers[0]);
    const strict = webhookTransport({ ...settings, allowLoopback: false }, rebinding);
    const outcome = await strict.send(message(secret, "https://hooks.example/"));
    expect(outcome).toMatchObject({ ok: false, error: expect.stringContaining("127.0.0.1") });
    expect(asked).toBe(2);
    expect(receiver.requests()).toBe(0);
    // A name with one bad address among good ones is refused too.
    const mixed: Resolve = async () => [
      { address: "93.184.216.34", family: 4 },
      { address: "10.1.2.3", family: 4 },
    ];
    const mixedOutcome = await webhookTransport({ ...settings, allowLoopback: false }, mixed).send(
      message(secret, "https://mixed.example/"),
    );
    expect(mixedOutcome).toMatchObject({ ok: false, error: expect.stringContaining("10.1.2.3") });
  });

  it("reaches a public receiver over https on 443 only: plain http and other ports reach loopback alone", async () => {
    const secret = newWebhookSecret();
    const receiver = await startWebhookReceiver({ secrets: [secret] });
    receivers.push(receiver);
    let asked = 0;
    const publicResolve: Resolve = async () => {
      asked += 1;
      return [{ address: "93.184.216.34", family: 4 }];
    };
    const strict = webhookTransport({ ...settings, allowLoopback: false }, publicResolve);
    for (const url of [
      "http://hooks.example/",
      "https://hooks.example:8443/",
      "https://hooks.example:25/",
      "http://93.184.216.34/",
    ]) {
      expect(await strict.send(message(secret, url)), url).toMatchObject({
        ok: false,
        status: null,
        error: expect.stringContaining("must be https on port 443"),
      });
    }
    expect(asked).toBe(0);
    // The devnet allows loopback: plain http to a name is sent only if the name is loopback.
    const devnet = webhookTransport(settings, publicResolve);
    const outcome = await devnet.send(message(secret, `http://hooks.example:${receiver.port}/`));
    expect(outcome).toMatchObject({
      ok: false,
      error: expect.stringContaining("reach loopback only"),
    });
    expect(asked).toBe(1);
    expect(
      await devnet.send(message(secret, `https://93.184.216.34:${receiver.port}/`)),
    ).toMatchObject({ ok: false, error: expect.stringContaining("must be https on port 443") });
    expect(receiver.requests()).toBe(0);
    expect(await devnet.send(message(secret, receiver.url))).toEqual({ ok: true, status: 200 });
  });

  it("does not follow a redirect", async () => {
    const secret = newWebhookSecret();
    const target = await startWebhookReceiver({ secrets: [secret] });
    receivers.push(target);
    const redirecting = await startWebhookReceiver({
      secrets: [secret],
      answer: (_request, response) => {
        response.writeHead(307, { location: target.url }).end();
        return "handled";
      },
    });
    receivers.push(redirecting);
    const outcome = await webhookTransport(settings, loopbackResolve).send(
      message(secret, redirecting.url),
    );
    expect(outcome).toEqual({ ok: false, status: 307, error: "redirect (307) not followed" });
    expect(target.requests()).toBe(0);
  });

  it("gives a silent receiver up after the timeout", async () => {
    const secret = newWebhookSecret();
    const silent = await startWebhookReceiver({ secrets: [secret], answer: () => "handled" });
    receivers.push(silent);
    const started = Date.now();
    const outcome = await webhookTransport({ ...settings, timeoutMs: 300 }, loopbackResolve).send(
      message(secret, silent.url),
    );
    expect(outcome).toMatchObject({ ok: false, status: null, error: "no answer within 300 ms" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("gives a send up when asked (the worker stopping), long before the timeout", async () => {
    const secret = newWebhookSecret();
    let hungUp: () => void = () => {};
    const closed = new Promise<void>((resolve) => {
      hungUp = resolve;
    });
    const silent = await startWebhookReceiver({
      secrets: [secret],
      answer: (request) => {
        request.socket.on("close", hungUp);
        return "handled";
      },
    });
    receivers.push(silent);
    const abort = new AbortController();
    const sending = webhookTransport(settings, loopbackResolve).send({
      ...message(secret, silent.url),
      signal: abort.signal,
    });
    // Given up only once the receiver holds the request.
    while (silent.requests() === 0) await new Promise((resolve) => setImmediate(resolve));
    abort.abort();
    expect(await sending).toMatchObject({ ok: false, status: null });
    // The connection is closed, not left to the 10 s timeout.
    await closed;
  });

  it("reads a flood of an answer only up to the cap", async () => {
    const secret = newWebhookSecret();
    let written = 0;
    const flooding = await startWebhookReceiver({
      secrets: [secret],
      answer: (_request, response) => {
        response.writeHead(200, { "content-type": "application/octet-stream" });
        const chunk = Buffer.alloc(64 * 1024, 120);
        // Writes until the transport hangs up (or 256 MB, far past the 1 kB cap).
        const pump = () => {
          while (written < 256 * 1024 * 1024 && !response.destroyed) {
            written += chunk.length;
            if (!response.write(chunk)) return void response.once("drain", pump);
          }
        };
        response.on("error", () => {});
        pump();
        return "handled";
      },
    });
    receivers.push(flooding);
    const outcome = await webhookTransport(
      { ...settings, timeoutMs: 10_000 },
      loopbackResolve,
    ).send(message(secret, flooding.url));
    expect(outcome).toEqual({ ok: true, status: 200 });
    expect(written).toBeLessThan(64 * 1024 * 1024);
  });
});
