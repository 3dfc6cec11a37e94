import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HealthJson as HealthReport } from "../../api/schemas/health.ts";
import type { RunningService } from "../../api/service.ts";
import { createPaidClaims, createPayoutHarness } from "../support/payouts.ts";
import { parsePrometheusText, sampleValue } from "../support/prometheusText.ts";
import { startTestService } from "../support/service.ts";
import { FAST_SERVICE_ENV, type Stack, startStack } from "../support/stack.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * GET /api/health reports the matcher's and the payouts' backlogs and turns degraded when
 * their oldest item is too old. The service runs as `api` only: no worker takes the work up,
 * as when the worker replica is gone; the payout steps are driven by hand.
 */

let stack: Stack;
let harness: Awaited<ReturnType<typeof createPayoutHarness>>;

beforeAll(async () => {
  stack = await startStack({
    serviceEnv: {
      ROLE: "api",
      HEALTH_MATCHER_BACKLOG_SECONDS: "1",
      HEALTH_PAYOUT_BACKLOG_SECONDS: "1",
    },
  });
  harness = await createPayoutHarness(stack.chain, stack.database.url);
});

afterAll(async () => {
  await stack?.chain.testClient.setAutomine(true);
  await harness?.stop();
  await stack?.stop();
});

async function health(url = stack.service.url) {
  const response = await fetch(`${url}/api/health`);
  return { status: response.status, body: (await response.json()) as HealthReport };
}

function healthWhen(condition: (report: HealthReport) => boolean, what: string) {
  return waitFor(
    async () => {
      const answer = await health();
      return condition(answer.body) ? answer : undefined;
    },
    { what },
  );
}

describe("health backlogs", () => {
  it("are empty and ok while nothing waits", async () => {
    await stack.mine(1);
    const head = Number(await stack.chain.publicClient.getBlockNumber());
    const { status, body } = await healthWhen(
      (report) => (report.indexer.indexed_block ?? -1) >= head,
      "the indexer to reach the head",
    );
    expect(status).toBe(200);
    expect(body.status).toBe("ok");
    expect(body.reasons).toEqual([]);
    expect(body.backlog).toEqual({
      ok: true,
      matcher: {
        cursor_block: null,
        waiting_transfers: 0,
        lag_blocks: 0,
        oldest_waiting_seconds: null,
      },
      payouts: {
        claims_paid: 0,
        oldest_paid_seconds: null,
        payouts_unfinished: 0,
        oldest_unfinished_seconds: null,
      },
      max_age_seconds: { matcher: 1, payouts: 1 },
    });
  });

  it("degrade with matcher_behind when a confirmed payment waits too long for the matcher", async () => {
    const created = await stack.api("/api/claims", {
      body: { payout_address: stack.chain.users[0]?.address },
    });
    const payer = stack.chain.users[1];
    if (!payer) throw new Error("no user 1");
    const amount = BigInt(String(created.body.amount_due_usdc).replace(".", ""));
    const hash = await stack.chain.transferUsdc(payer, stack.chain.payTo.address, amount);
    const { blockNumber } = await stack.chain.publicClient.getTransactionReceipt({ hash });

    // Mined and indexed but not yet confirmed: not the matcher's work yet.
    const unconfirmed = await healthWhen(
      (report) => (report.indexer.indexed_block ?? -1) >= Number(blockNumber),
      "the payment to be indexed",
    );
    expect(unconfirmed.body.backlog?.matcher?.waiting_transfers).toBe(0);

    await stack.mine(2);
    const { status, body } = await healthWhen(
      (report) => report.reasons.includes("matcher_behind"),
      "matcher_behind",
    );
    expect(status).toBe(200);
    expect(body.status).toBe("degraded");
    expect(body.backlog).toMatchObject({
      ok: false,
      matcher: { waiting_transfers: 1, cursor_block: null },
    });
    expect(body.backlog?.matcher?.lag_blocks).toBeGreaterThanOrEqual(1);
    expect(body.backlog?.matcher?.oldest_waiting_seconds).toBeGreaterThan(1);

    const metrics = parsePrometheusText(await (await fetch(`${stack.service.url}/metrics`)).text());
    expect(sampleValue(metrics, "pay_and_earn_backlog_items", { queue: "matcher" })).toBe(1);
    expect(
      sampleValue(metrics, "pay_and_earn_backlog_oldest_seconds", { queue: "matcher" }),
    ).toBeGreaterThan(1);
  });

  it("stay ok under the default thresholds for the same backlog", async () => {
    let patient: RunningService | undefined;
    try {
      patient = await startTestService(stack.chain, stack.database.url, {
        ...FAST_SERVICE_ENV,
        ROLE: "api",
      });
      const { body } = await health(patient.url);
      expect(body.backlog?.matcher?.waiting_transfers).toBe(1);
      expect(body.backlog?.max_age_seconds).toEqual({ matcher: 60, payouts: 120 });
      expect(body.reasons).not.toContain("matcher_behind");
    } finally {
      await patient?.stop();
    }
  });

  it("degrade with payouts_waiting when a paid claim waits too long for its payout", async () => {
    await createPaidClaims(stack.service.sql, 1);
    const { body } = await healthWhen(
      (report) => report.reasons.includes("payouts_waiting"),
      "payouts_waiting",
    );
    expect(body.status).toBe("degraded");
    expect(body.backlog?.payouts).toMatchObject({ claims_paid: 1, payouts_unfinished: 0 });
    expect(body.backlog?.payouts.oldest_paid_seconds).toBeGreaterThan(1);
    // The wallet is funded: the wait is the backlog's own reason, not the wallet's.
    expect(body.reasons).not.toContain("payout_wallet_low_usdc");
  });

  it("degrade with payouts_unconfirmed while a signed payout is not mined, and recover once it is", async () => {
    await stack.chain.testClient.setAutomine(false);
    await harness.sender.tick();
    const { body } = await healthWhen(
      (report) =>
        report.reasons.includes("payouts_unconfirmed") &&
        !report.reasons.includes("payouts_waiting"),
      "payouts_unconfirmed",
    );
    expect(body.backlog?.payouts).toMatchObject({ claims_paid: 0, payouts_unfinished: 1 });
    expect(body.backlog?.payouts.oldest_unfinished_seconds).toBeGreaterThan(1);

    await stack.chain.testClient.setAutomine(true);
    await stack.mine(1);
    await waitFor(
      async () => {
        await harness.confirmer.tick();
        const [row] = await harness.sql<{ n: number }[]>`
          select count(*)::int as n from app.payouts where status = 'confirmed'`;
        return row?.n === 1;
      },
      { what: "the payout to be confirmed" },
    );
    // Health is shared for READ_CACHE_MS: the report catches up within that.
    const recovered = await healthWhen(
      (report) => report.backlog?.payouts.payouts_unfinished === 0,
      "health to see the payout confirmed",
    );
    expect(recovered.body.backlog?.payouts).toEqual({
      claims_paid: 0,
      oldest_paid_seconds: null,
      payouts_unfinished: 0,
      oldest_unfinished_seconds: null,
    });
    expect(recovered.body.reasons).not.toContain("payouts_unconfirmed");
    expect(recovered.body.reasons).not.toContain("payouts_waiting");
  });
});
