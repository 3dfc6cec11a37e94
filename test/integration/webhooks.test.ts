import { type Task, TaskState } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dataPart, userMessage } from "../support/a2aMessages.ts";
import { runCli } from "../support/cliProcess.ts";
import { readEventStream, subscribeGraphql } from "../support/eventStream.ts";
import { testServiceEnv } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import {
  type ReceivedWebhook,
  startWebhookReceiver,
  type WebhookReceiver,
} from "../support/webhookReceiver.ts";
import { payingFetch } from "../support/x402.ts";

/**
 * Webhooks end to end against real receivers that verify with the `standardwebhooks` package:
 * an operator's endpoint registered with the CLI and a claim's own `webhook_url` get every
 * change of the claim, signed, in order, the data being the claim as the API shows it; a
 * failing receiver is retried with backoff and sees redeliveries marked; one that never
 * answers well is given up and disabled, listed by `webhooks failures` and sent again by
 * `webhooks redeliver`. The SSE stream gives the same envelopes and resumes with Last-Event-ID.
 */

const WEBHOOK_ENV = {
  WEBHOOK_RETRY_SCHEDULE_MS: "200,300,400",
  WEBHOOK_INTERVAL_MS: "50",
  // Generous: on a loaded machine the receivers, in the test's own process, answer late.
  WEBHOOK_TIMEOUT_MS: "10000",
  WEBHOOK_DISABLE_AFTER_SECONDS: "0",
};

let stack: Stack;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  stack = await startStack({ serviceEnv: WEBHOOK_ENV });
});

afterAll(async () => {
  await Promise.all(receivers.map((receiver) => receiver.stop()));
  await stack?.stop();
});

function operatorEnv(): Record<string, string> {
  return testServiceEnv(stack.chain, stack.database.url, {
    PUBLIC_URL: stack.service.url,
    ...WEBHOOK_ENV,
  });
}

async function cli(args: string[]) {
  const run = await runCli([...args, "--json"], operatorEnv());
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

async function receiver(options: Parameters<typeof startWebhookReceiver>[0] = {}) {
  const started = await startWebhookReceiver(options);
  receivers.push(started);
  return started;
}

const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;

async function payClaim(claim: { amount_due_usdc: string }, payer = 0) {
  const user = stack.chain.users[payer] as (typeof stack.chain.users)[number];
  await stack.chain.transferUsdc(user, stack.chain.payTo.address, atomic(claim.amount_due_usdc));
  await stack.mine(2);
}

function ofClaim(received: ReceivedWebhook[], claimId: string) {
  return received.filter((webhook) => webhook.payload.data.claim_id === claimId);
}

const LIFE = ["claim.created", "claim.paid", "claim.paying", "claim.completed"];

describe("webhooks", () => {
  it("posts every change of a claim, signed and in order, to an operator's endpoint and to the claim's webhook_url", async () => {
    const operator = await receiver();
    const added = await cli(["webhooks", "add", operator.url, "--description", "shop"]);
    operator.secrets.push(added.secret as string);
    expect(added.secret).toMatch(/^whsec_/);

    const own = await receiver();
    const created = await stack.createClaim(newAddress(), { webhook_url: own.url });
    expect(created.webhook_secret).toMatch(/^whsec_/);
    own.secrets.push(created.webhook_secret as string);
    await payClaim(created);
    const completed = await stack.untilClaimStatus(created.claim_id, "completed");

    for (const target of [own, operator]) {
      const got = await waitFor(
        () =>
          ofClaim(target.received, created.claim_id).length >= LIFE.length &&
          ofClaim(target.received, created.claim_id),
        { what: "the claim's four events" },
      );
      expect(got.map((webhook) => webhook.payload.type)).toEqual(LIFE);
      // The webhook-id is the envelope's id; the last one's data is the claim as GET shows it.
      for (const webhook of got) expect(webhook.id).toBe(webhook.payload.id);
      expect(got.at(-1)?.payload.data).toEqual(completed);
    }
    // The operator's secret was known before any event: each came once, at the first attempt.
    // (The claim's own receiver learns its secret from the creation's answer, after the first
    // delivery may have come: it refuses that one, and the retry gets through.)
    const operatorGot = ofClaim(operator.received, created.claim_id);
    expect(operatorGot.every((webhook) => webhook.attempt === 1 && !webhook.redelivery)).toBe(true);
    expect(operator.rejected()).toBe(0);
    // The claim's own endpoint hears of nothing else; the operator's of everything.
    expect(
      own.received.every((webhook) => webhook.payload.data.claim_id === created.claim_id),
    ).toBe(true);

    // The same envelopes on the live stream; resuming after the second gives the rest.
    const streamUrl = `${stack.service.url}/api/claims/${created.claim_id}/events`;
    const whole = await readEventStream(streamUrl, { count: 4 });
    expect(whole.headers.get("content-type")).toContain("text/event-stream");
    expect(whole.events.map((event) => event.event)).toEqual(LIFE);
    expect(whole.events.map((event) => event.data)).toEqual(
      ofClaim(own.received, created.claim_id).map((webhook) => webhook.payload),
    );
    const resumed = await readEventStream(streamUrl, {
      count: 2,
      lastEventId: whole.events[1]?.id,
    });
    expect(resumed.events.map((event) => event.event)).toEqual(LIFE.slice(2));
  }, 180_000);

  it("streams a change as it happens", async () => {
    const created = await stack.createClaim(newAddress());
    const streamUrl = `${stack.service.url}/api/claims/${created.claim_id}/events`;
    const streaming = readEventStream(streamUrl, { count: 2 });
    await payClaim(created, 1);
    const { events } = await streaming;
    expect(events.map((event) => event.event)).toEqual(["claim.created", "claim.paid"]);
    expect(Number(events[1]?.id)).toBeGreaterThan(Number(events[0]?.id));
    const missing = await readEventStream(`${stack.service.url}/api/claims/clm_missing/events`, {
      count: 0,
    });
    expect(missing.status).toBe(404);
  });

  it("a GraphQL subscription over SSE follows the claim's changes", async () => {
    const created = await stack.createClaim(newAddress());
    const subscribing = fetch(`${stack.service.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({
        query: `subscription { claimChanged(id: "${created.claim_id}") { id status } }`,
      }),
    });
    const response = await subscribing;
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const statuses: string[] = [];
    let text = "";
    let paid = false;
    while (statuses.length < 2) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      for (const match of text.matchAll(/^data: (.+)$/gm)) {
        const status = JSON.parse(match[1] as string).data?.claimChanged?.status;
        if (status && statuses.length < 2 && !statuses.includes(status)) statuses.push(status);
      }
      if (statuses.length === 1 && !paid) {
        paid = true;
        await payClaim(created, 3);
      }
    }
    await reader.cancel();
    expect(statuses).toEqual(["awaiting_payment", "paid"]);
  });

  it("a GraphQL subscription over SSE adds each completed claim's ledger entry, streams bounded per client", async () => {
    const graphql = `${stack.service.url}/graphql`;
    const agentName = `ledger-live-${Date.now()}`;
    const ledger = await subscribeGraphql(
      graphql,
      `subscription { ledgerEntryAdded(agentName: "${agentName}") { claimId agentName amountUsdc payoutTx } }`,
    );
    expect(ledger.status).toBe(200);
    const created = await stack.createClaim(newAddress(), { agent_name: agentName });
    await payClaim(created, 5);
    const completed = await stack.untilClaimStatus(created.claim_id, "completed");
    expect(await ledger.next()).toEqual({
      data: {
        ledgerEntryAdded: {
          claimId: created.claim_id,
          agentName,
          amountUsdc: "1.000000",
          payoutTx: completed.payout_tx,
        },
      },
    });

    // One client holds EVENT_STREAMS_PER_CLIENT (10) live streams of any kind at once: nine more
    // open, the eleventh is refused, and one hung up makes room again.
    const more = await Promise.all(
      Array.from({ length: 9 }, () =>
        subscribeGraphql(
          graphql,
          `subscription { claimChanged(id: "${created.claim_id}") { id } }`,
        ),
      ),
    );
    for (const stream of more)
      expect(await stream.next()).toMatchObject({ data: expect.anything() });
    const refused = await subscribeGraphql(
      graphql,
      "subscription { ledgerEntryAdded { claimId } }",
    );
    expect(JSON.stringify(await refused.next())).toContain("Too many live streams");
    await ledger.close();
    // The server notices the hang-up as the connection closes: until then, still refused.
    await waitFor(
      async () => {
        const again = await subscribeGraphql(
          graphql,
          `subscription { claimChanged(id: "${created.claim_id}") { id } }`,
        );
        const first = await again.next();
        await again.close();
        return JSON.stringify(first).includes(created.claim_id);
      },
      { what: "a slot given back when a stream hung up" },
    );
    await Promise.all(more.map((stream) => stream.close()));
  }, 180_000);

  it("retries a failing receiver with backoff, redeliveries marked, the claim's order kept", async () => {
    // Fails the first three requests, then takes everything.
    const flaky = await receiver({ answer: (_request, _response, nth) => (nth <= 3 ? 503 : 200) });
    const created = await stack.createClaim(newAddress(), { webhook_url: flaky.url });
    flaky.secrets.push(created.webhook_secret as string);
    await payClaim(created, 2);
    await stack.untilClaimStatus(created.claim_id, "completed");
    const got = await waitFor(
      () =>
        ofClaim(flaky.received, created.claim_id).length >= LIFE.length &&
        ofClaim(flaky.received, created.claim_id),
      { what: "the claim's four events, after the failures" },
    );
    expect(got.map((webhook) => webhook.payload.type)).toEqual(LIFE);
    // The first three requests failed, whichever events they carried; the later ones say so.
    expect(got[0]).toMatchObject({ redelivery: true });
    expect(got[0]?.attempt).toBeGreaterThan(1);
    expect(flaky.requests()).toBeGreaterThanOrEqual(3 + LIFE.length);
  });

  it("gives a dead endpoint up, disables it, lists the failure and redelivers it from the CLI", async () => {
    let alive = false;
    const dead = await receiver({ answer: () => (alive ? 200 : 500) });
    const created = await stack.createClaim(newAddress(), { webhook_url: dead.url });
    dead.secrets.push(created.webhook_secret as string);
    // One attempt and three retries, then the delivery fails and the endpoint is disabled.
    await waitFor(
      async () => {
        const [row] = await stack.service.sql<{ disabled: boolean }[]>`
          select disabled_at is not null as disabled from app.webhook_endpoints
          where claim_id = ${created.claim_id}`;
        return row?.disabled;
      },
      { what: "the endpoint disabled", timeoutMs: 40_000 },
    );
    const listed = (await cli(["webhooks", "failures"])).failures as Record<string, unknown>[];
    const failures = listed.find((failure) => failure.claim_id === created.claim_id);
    if (!failures) throw new Error(`no failure listed for ${created.claim_id}`);
    expect(failures).toMatchObject({ type: "claim.created", attempts: 4, url: dead.url });
    expect(dead.requests()).toBe(4);
    alive = true;
    const redelivered = await cli(["webhooks", "redeliver", String(failures.id)]);
    expect(redelivered.redelivered).toBe(1);
    const [again] = await waitFor(() => dead.received.length > 0 && dead.received);
    expect(again).toMatchObject({ redelivery: true, attempt: 1 });
    expect(again?.payload.type).toBe("claim.created");
  }, 180_000);

  it("takes a webhook_url with an x402 payment: refused before anything is paid, else the paid claim's events posted there", async () => {
    const payer = stack.chain.user(5);
    const pay = (body: Record<string, unknown>) =>
      payingFetch(payer.privateKey, "$10")(`${stack.service.url}/api/x402/earn`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const balance = await stack.chain.usdcBalance(payer.address);
    const claims = await stack.claimCount();
    const refused = await pay({
      payout_address: newAddress(),
      webhook_url: "http://10.0.0.1/hook",
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { type: string }).type).toBe("/problems/invalid_request");
    expect(await stack.chain.usdcBalance(payer.address)).toBe(balance);
    expect(await stack.claimCount()).toBe(claims);

    const own = await receiver();
    const response = await pay({ payout_address: newAddress(), webhook_url: own.url });
    const answer = (await response.json()) as { claim_id: string; webhook_secret?: string };
    expect(response.status, JSON.stringify(answer)).toBe(200);
    expect(answer.webhook_secret).toMatch(/^whsec_/);
    own.secrets.push(answer.webhook_secret as string);
    const got = await waitFor(
      () => {
        const types = ofClaim(own.received, answer.claim_id).map((w) => w.payload.type);
        return types.includes("claim.completed") && types;
      },
      { what: "the x402 claim's events up to claim.completed" },
    );
    expect(got[0]).toBe("claim.created");
    expect(got.at(-1)).toBe("claim.completed");
    expect(new Set(got).size).toBe(got.length);
  });

  it("never gives a claim someone else asked for to a creation with a webhook_url", async () => {
    const payoutAddress = newAddress();
    const first = await stack.createClaim(payoutAddress);
    // The same request again is given the open claim back; with a webhook_url it is not: the
    // stranger's endpoint gets a claim of its own, and hears nothing of the first.
    const again = await stack.api("/api/claims", { body: { payout_address: payoutAddress } });
    expect([again.status, again.body.claim_id]).toEqual([200, first.claim_id]);
    const stranger = await receiver();
    const theirs = await stack.createClaim(payoutAddress, { webhook_url: stranger.url });
    stranger.secrets.push(theirs.webhook_secret as string);
    expect(theirs.claim_id).not.toBe(first.claim_id);
    await waitFor(() => ofClaim(stranger.received, theirs.claim_id).length > 0, {
      what: "the stranger's own claim.created",
    });
    await payClaim(first);
    await stack.untilClaimStatus(first.claim_id, "completed");
    const endpoints = await stack.service.sql<{ count: number }[]>`
      select count(*)::int as count from app.webhook_endpoints where claim_id = ${first.claim_id}`;
    expect(endpoints[0]?.count).toBe(0);
    expect(
      stranger.received.every((webhook) => webhook.payload.data.claim_id === theirs.claim_id),
    ).toBe(true);
  });

  it("refuses a webhook_url that is not public before creating anything", async () => {
    const before = await stack.claimCount();
    for (const url of [
      "http://10.0.0.1/hook",
      "http://[fd00::1]/hook",
      "http://169.254.169.254/",
      "ftp://example.com/",
      // A public address only over https on 443, even where loopback is allowed (the tests').
      "http://93.184.216.34/hook",
      "https://93.184.216.34:8443/hook",
    ]) {
      const response = await stack.api("/api/claims", {
        body: { payout_address: newAddress(), webhook_url: url },
      });
      expect(response.status, url).toBe(400);
      expect(response.body.type).toBe("/problems/invalid_request");
    }
    expect(await stack.claimCount()).toBe(before);
    // A URL is kept as the parser reads it: the line break a typed one carried is not stored
    // (a list of failures would print it as a forged line of its own).
    const typed = await stack.createClaim(newAddress(), {
      webhook_url: "http://127.0.0.1:9/hooks\nforged: line",
    });
    const [stored] = await stack.service.sql<{ url: string }[]>`
      select url from app.webhook_endpoints where claim_id = ${typed.claim_id}`;
    expect(stored?.url).toBe("http://127.0.0.1:9/hooksforged:%20line");
  });
});

/** An A2A push notification as the receiver verified it: a StreamResponse of A2A 1.0. */
interface PushedStatus {
  statusUpdate?: {
    taskId: string;
    contextId: string;
    status: { state: string; message?: { parts: { data?: Record<string, unknown> }[] } };
    metadata: { "pay-and-earn.event": { id: string; type: string } };
  };
}

describe("A2A push notifications", () => {
  it("gives each create_claim task a claim of its own, and refuses a webhook_url there", async () => {
    const client = await new ClientFactory().createFromUrl(stack.service.url);
    const payoutAddress = newAddress();
    const send = async (args: Record<string, unknown>) =>
      (await client.sendMessage({
        message: userMessage([dataPart({ skill: "create_claim", ...args })]),
      } as never)) as Task;
    const first = await send({ payout_address: payoutAddress });
    const second = await send({ payout_address: payoutAddress });
    expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(second.metadata?.claim_id).toBeTypeOf("string");
    expect(second.metadata?.claim_id).not.toBe(first.metadata?.claim_id);
    const before = await stack.claimCount();
    const withUrl = await send({
      payout_address: newAddress(),
      webhook_url: "https://hooks.example/",
    });
    expect(withUrl.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(JSON.stringify(withUrl.status?.message)).toContain("webhook_url");
    expect(await stack.claimCount()).toBe(before);
  });

  it("sends a claim task's changes to its push config, signed by the service, in order, through the outbox", async () => {
    const client = await new ClientFactory().createFromUrl(stack.service.url);
    expect((await client.getAgentCard()).capabilities?.pushNotifications).toBe(true);
    const token = `tok-${crypto.randomUUID()}`;
    // The receiver verifies the service's signature by the offer's receipt_signer: the token,
    // which travels in a header, is no key.
    const offer = await stack.api("/api/info");
    const agent = await receiver({ serviceSigner: offer.body.receipt_signer as `0x${string}` });
    const payer = stack.chain.user(4);
    const task = (await client.sendMessage({
      message: userMessage([dataPart({ skill: "create_claim", payout_address: newAddress() })]),
    } as never)) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const claimId = task.metadata?.claim_id as string;
    const config = {
      tenant: "",
      taskId: task.id,
      id: "shop",
      url: agent.url,
      token,
      authentication: { scheme: "Bearer", credentials: "sesame" },
    };
    await client.createTaskPushNotificationConfig(config);

    // Read back, a config shows neither its token nor its credentials (anyone with the task's
    // id may read it); a second config of the same id replaces the first.
    const read = await client.getTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      id: "shop",
    });
    expect(read).toMatchObject({ id: "shop", url: agent.url, token: "" });
    expect(read.authentication).toMatchObject({ scheme: "Bearer", credentials: "" });
    // Not public, or a header that would break the request: refused, nothing stored.
    for (const refused of [
      { ...config, id: "private", url: "http://10.0.0.1/hook" },
      { ...config, id: "metadata", url: "http://169.254.169.254/" },
      { ...config, id: "split", token: "a\r\nx-injected: 1" },
    ]) {
      await expect(client.createTaskPushNotificationConfig(refused), refused.id).rejects.toThrow();
    }
    const listed = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(listed.configs.map((one) => one.id)).toEqual(["shop"]);

    const claim = (await (await fetch(`${stack.service.url}/api/claims/${claimId}`)).json()) as {
      amount_due_usdc: string;
    };
    await stack.chain.transferUsdc(payer, stack.chain.payTo.address, atomic(claim.amount_due_usdc));
    await stack.mine(2);
    await stack.untilClaimStatus(claimId, "completed");
    // The config came after the claim's creation: its event is delivered too, first.
    const pushed = await waitFor(() => agent.received.length >= LIFE.length && agent.received, {
      what: "the pushes of the claim's four events",
    });
    const updates = pushed.map((one) => (one.payload as unknown as PushedStatus).statusUpdate);
    expect(updates.map((update) => update?.metadata["pay-and-earn.event"].type)).toEqual(LIFE);
    expect(updates.map((update) => update?.status.state)).toEqual([
      "TASK_STATE_INPUT_REQUIRED",
      "TASK_STATE_WORKING",
      "TASK_STATE_WORKING",
      "TASK_STATE_COMPLETED",
    ]);
    for (const [index, one] of pushed.entries()) {
      expect(updates[index]).toMatchObject({ taskId: task.id, contextId: task.contextId });
      expect(one.id).toBe(updates[index]?.metadata["pay-and-earn.event"].id);
      expect(one.headers["content-type"]).toBe("application/a2a+json");
      expect(one.headers["x-a2a-notification-token"]).toBe(token);
      expect(one.headers.authorization).toBe("Bearer sesame");
    }
    // Every request the receiver saw was signed: the SDK posted nothing of its own.
    expect(agent.rejected()).toBe(0);
    expect(agent.requests()).toBe(pushed.length);

    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "shop" });
    const after = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(after.configs).toEqual([]);
  }, 180_000);
});
