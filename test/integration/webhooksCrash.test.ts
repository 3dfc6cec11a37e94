import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CrashPoint } from "../../api/crashHook.ts";
import type { Database } from "../../api/db/connect.ts";
import { addOperatorEndpoint } from "../../api/webhooks/webhookEndpoints.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import { createPaidClaims, waitForStatus } from "../support/payouts.ts";
import { testServiceEnv } from "../support/service.ts";
import { type ServiceProcess, startServiceProcess } from "../support/serviceProcess.ts";
import { waitFor } from "../support/waitFor.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhookReceiver.ts";

/**
 * Webhooks across crashes: the service as a real process (`node api/main.ts`, workers only),
 * SIGKILLed after claims changed and before their deliveries were sent, then after they were
 * sent and before what the receiver answered was stored, while the receiver fails some requests
 * and leaves others without an answer. After the restarts every event of every claim has
 * arrived at least once, each claim's in the order of its changes, and what came again is
 * marked as a redelivery under the same webhook-id.
 */

let chain: TestChain;
let database: TestDatabase;
let sql: Database;
let chainWithDatabase: ChainWithDatabase | undefined;
let receiver: WebhookReceiver | undefined;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  ({ chain, database, sql } = chainWithDatabase = await startChainWithDatabase({ migrate: true }));
});

afterAll(async () => {
  await Promise.all(running.map((service) => service.stop()));
  await receiver?.stop();
  await chainWithDatabase?.stop();
});

function startWorker(crashAt?: CrashPoint) {
  const service = startServiceProcess(
    testServiceEnv(chain, database.url, {
      ROLE: "worker",
      PAYOUT_INTERVAL_MS: "50",
      PAYOUT_CONFIRMATIONS: "1",
      WEBHOOK_INTERVAL_MS: "50",
      WEBHOOK_TIMEOUT_MS: "500",
      WEBHOOK_RETRY_SCHEDULE_MS: "100,100,200,200,300,300,400,400,500,500",
      ...(crashAt ? { CRASH_AT: crashAt } : {}),
    }),
  );
  running.push(service);
  return service;
}

async function expectKilled(service: ServiceProcess) {
  const exit = await service.exited;
  expect(exit, service.output()).toEqual({ code: null, signal: "SIGKILL" });
}

describe("webhooks across a crash", () => {
  it("delivers every event at least once, in order per claim, through kills and a flaky receiver", async () => {
    // Every fifth request answered 503, every seventh left without an answer (a timeout).
    receiver = await startWebhookReceiver({
      answer: (_request, _response, nth) => (nth % 7 === 0 ? "handled" : nth % 5 === 0 ? 503 : 200),
    });
    const endpoint = await addOperatorEndpoint(sql, {
      url: receiver.url,
      eventTypes: [],
      description: "crash test",
    });
    receiver.secrets.push(endpoint.secret);
    const claims = await createPaidClaims(sql, 5);
    const ids = claims.map((claim) => claim.id);

    // Claims created and paid, their events committed; killed before a delivery went out.
    await expectKilled(startWorker("before_webhooks_sent"));
    expect(receiver.requests()).toBe(0);
    // Their lease spent, the deliveries go out; killed before what came back was stored.
    await expectKilled(startWorker("after_webhooks_sent"));
    const beforeRestart = receiver.received.length;
    expect(receiver.requests()).toBeGreaterThan(0);

    startWorker();
    await waitForStatus(sql, ids, "completed", 120_000);
    const events = await sql<{ id: bigint; claim_id: string; type: string }[]>`
      select id, claim_id, type from app.events where claim_id = any(${ids}::text[]) order by id`;
    expect(events.length).toBe(ids.length * 4);
    await waitFor(
      () => {
        const arrived = new Set(receiver?.received.map((webhook) => webhook.id));
        return events.every((event) => arrived.has(`evt_${event.id}`));
      },
      { what: "every event at the receiver", timeoutMs: 45_000 },
    );
    for (const id of ids) {
      const expected = events
        .filter((event) => event.claim_id === id)
        .map((event) => `evt_${event.id}`);
      const firstArrivals = [
        ...new Set(
          receiver.received
            .filter((webhook) => webhook.payload.data.claim_id === id)
            .map((webhook) => webhook.id),
        ),
      ];
      expect(firstArrivals, id).toEqual(expected);
      expect(
        receiver.received
          .filter((webhook) => webhook.id === expected[0])
          .map((webhook) => webhook.payload.type),
      ).toContain("claim.created");
    }
    // What arrived before the kill came again, marked: the receiver deduplicates by webhook-id.
    const seen = new Map<string, number>();
    for (const webhook of receiver.received) seen.set(webhook.id, (seen.get(webhook.id) ?? 0) + 1);
    expect(beforeRestart).toBeGreaterThan(0);
    const again = receiver.received.filter(
      (webhook, index) =>
        receiver?.received.findIndex((earlier) => earlier.id === webhook.id) !== index,
    );
    expect(again.length).toBeGreaterThan(0);
    expect(again.every((webhook) => webhook.redelivery && webhook.attempt > 1)).toBe(true);
    expect(receiver.rejected()).toBe(0);
    // Three service starts, each lease to run out: minutes on a loaded machine.
  }, 300_000);
});
