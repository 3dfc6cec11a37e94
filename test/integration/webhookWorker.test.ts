import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { workerLockSession } from "../../api/db/servicePools.ts";
import { createLogger } from "../../api/logger.ts";
import type { ServiceDeps } from "../../api/serviceDeps.ts";
import { relineDeliveries } from "../../api/webhooks/deliveryLines.ts";
import { systemResolve } from "../../api/webhooks/publicAddress.ts";
import { webhookTransport } from "../../api/webhooks/sendWebhook.ts";
import {
  recordDeliveryResults,
  redeliver,
  takeDueDeliveries,
} from "../../api/webhooks/webhookDeliveries.ts";
import { addOperatorEndpoint, newWebhookSecret } from "../../api/webhooks/webhookEndpoints.ts";
import { createWebhookWorker } from "../../api/webhooks/webhookWorker.ts";
import { LOCK_KEYS } from "../../api/workers/lockKeys.ts";
import { runWorker } from "../../api/workers/runWorker.ts";
import { devnetAccounts } from "../../scripts/devnet/accounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { testServiceConfig } from "../support/service.ts";
import { waitFor } from "../support/waitFor.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhookReceiver.ts";

/**
 * The delivery worker against real receivers, on a database of its own (no chain: the events
 * are written as the triggers write them). A receiver that takes the connection and never
 * answers holds only its endpoint's share of the slots while a healthy one gets everything;
 * and deliveries waiting behind the head of their line, however many, are not read by a poll.
 */

let database: TestDatabase;
let sql: Database;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 4 });
});

afterAll(async () => {
  await Promise.all(receivers.map((receiver) => receiver.stop()));
  await sql?.end({ timeout: 5 });
  await database?.drop();
});

function workerDeps(overrides: Record<string, string>): ServiceDeps {
  const config = testServiceConfig(
    { rpcUrl: "http://127.0.0.1:9", accounts: devnetAccounts() },
    database.url,
    { WEBHOOK_INTERVAL_MS: "50", ...overrides },
  );
  return {
    sql,
    // Never asked: the webhook worker reads no chain.
    chain: createChainReader(config.chain.rpcUrl, config.chain.chainId),
    config,
    logger: createLogger(config.logLevel),
  };
}

async function receiver(options: Parameters<typeof startWebhookReceiver>[0] = {}) {
  const started = await startWebhookReceiver(options);
  receivers.push(started);
  return started;
}

async function operatorEndpoint(target: WebhookReceiver): Promise<string> {
  const endpoint = await addOperatorEndpoint(sql, {
    url: target.url,
    eventTypes: [],
    description: null,
  });
  target.secrets.push(endpoint.secret);
  return endpoint.id;
}

/**
 * `perLine` unmatched payments on each of `lines` ordering keys, as
 * app.record_unmatched_transfers writes them, in one transaction, each line's in order. The
 * transfer says where it stands: its hash is `base + line * 1000 + place`, its log index `place`.
 */
async function writeEvents(
  prefix: string,
  base: number,
  lines: number,
  perLine: number,
): Promise<void> {
  await sql`
    insert into app.events (type, ordering_key, snapshot)
    select 'payment.unmatched', ${prefix} || ':' || line,
      jsonb_build_object('tx_hash', '0x' || lpad(to_hex(${base} + line * 1000 + place), 64, '0'),
        'log_index', place, 'block_number', '1',
        'from_address', '0x000000000000000000000000000000000000dead',
        'value', '1000000', 'reason', 'no_matching_claim', 'claim_id', null)
    from generate_series(1, ${perLine}) place, generate_series(1, ${lines}) line
    order by place, line`;
  await sql`select pg_notify('pay_and_earn_events', '')`;
}

/** The line and place of a transfer written by writeEvents with base 0. */
function lineAndPlace(webhook: WebhookReceiver["received"][number]) {
  const hash = Number(BigInt(String(webhook.payload.data.tx_hash)));
  return { line: Math.floor(hash / 1000), place: Number(webhook.payload.data.log_index) };
}

describe("the webhook delivery worker", () => {
  it("keeps sending to a healthy endpoint while a receiver that never answers holds its own share of the slots", async () => {
    // Accepts every request and never answers: each attempt holds its connection until the
    // timeout, two minutes here, far longer than the healthy endpoint's deliveries may take.
    const tarpit = await receiver({ answer: () => "handled" });
    const healthy = await receiver();
    const tarpitId = await operatorEndpoint(tarpit);
    await operatorEndpoint(healthy);
    // 40 transfers, each its own line: 40 due deliveries to each endpoint, made together, so
    // the two endpoints' deliveries alternate in the queue.
    await writeEvents("tarpit", 0, 40, 1);
    const deps = workerDeps({
      WEBHOOK_TIMEOUT_MS: "120000",
      WEBHOOK_CONCURRENCY_PER_ENDPOINT: "4",
    });
    expect(deps.config.webhooks).toMatchObject({ concurrency: 32, concurrencyPerEndpoint: 4 });
    const running = runWorker(
      { lockSession: workerLockSession(deps.config), notifications: sql },
      createWebhookWorker(deps, webhookTransport(deps.config.webhooks, systemResolve)),
      deps.logger,
    );
    try {
      // Were the slots a batch that waits for its slowest, every batch would hold a tarpit
      // delivery and the healthy endpoint would get a batch's share every two minutes.
      await waitFor(() => healthy.received.length >= 40, {
        what: () => `the healthy endpoint's 40 deliveries (${healthy.received.length} so far)`,
        timeoutMs: 60_000,
      });
      expect(new Set(healthy.received.map((webhook) => webhook.id)).size).toBe(40);
      // Meanwhile the tarpit held four connections, never more, each a first attempt still
      // waiting for its answer.
      const tarpitAttempts = await sql<{ attempts: number; count: number }[]>`
        select attempts, count(*)::int as count from app.webhook_deliveries
        where endpoint_id = ${tarpitId} group by attempts order by attempts`;
      expect(tarpitAttempts).toEqual([
        { attempts: 0, count: 36 },
        { attempts: 1, count: 4 },
      ]);
      expect(tarpit.requests()).toBe(4);
    } finally {
      // Stopping gives up the four sends still waiting (after a short grace, not two minutes):
      // nothing is written, so each stays leased and goes again as a redelivery.
      await running.stop();
    }
    const [left] = await sql<{ leased: number }[]>`
      select count(*)::int as leased from app.webhook_deliveries
      where endpoint_id = ${tarpitId} and status = 'pending' and attempts = 1
        and run_at > now() + interval '200 seconds' and last_error is null`;
    expect(left?.leased).toBe(4);
    await sql`delete from app.webhook_endpoints`;
  }, 120_000);

  it("deletes the events past EVENT_RETENTION_DAYS at its first tick, and keeps the rest", async () => {
    const [old, recent] = await sql<{ id: bigint }[]>`
      insert into app.events (type, ordering_key, snapshot, fanned_out, occurred_at)
      values ('payment.unmatched', 'transfer:old', '{}'::jsonb, true, now() - interval '3 days'),
        ('payment.unmatched', 'transfer:recent', '{}'::jsonb, true, now() - interval '1 day')
      returning id`;
    const deps = workerDeps({ EVENT_RETENTION_DAYS: "2" });
    const worker = createWebhookWorker(deps, webhookTransport(deps.config.webhooks, systemResolve));
    await worker.tick();
    const left = await sql<{ id: bigint }[]>`
      select id from app.events where id = any(${[String(old?.id), String(recent?.id)]}::bigint[])`;
    expect(left.map((row) => row.id)).toEqual([recent?.id]);
    await worker.settle?.();
  });

  it("reads only the heads of lines when a poll looks for due deliveries, however many wait behind them", async () => {
    let alive = false;
    const dead = await receiver({ answer: () => (alive ? 200 : 500) });
    const deadId = await operatorEndpoint(dead);
    // 50 lines of 20 events: 50 heads, 950 deliveries behind them.
    await writeEvents("dead", 100_000, 50, 20);
    // One retry, an hour after the first attempt.
    const deps = workerDeps({
      WEBHOOK_RETRY_SCHEDULE_MS: "3600000",
      WEBHOOK_CONCURRENCY_PER_ENDPOINT: "50",
    });
    const worker = createWebhookWorker(deps, webhookTransport(deps.config.webhooks, systemResolve));
    // Driven by hand: each tick writes the answers that came, then sends what is due.
    const tickUntil = (what: string, done: () => Promise<boolean>) =>
      waitFor(
        async () => {
          await worker.tick();
          return done();
        },
        { what, timeoutMs: 60_000 },
      );
    const count = async (where: ReturnType<typeof sql>) => {
      const [row] = await sql<{ count: number }[]>`
        select count(*)::int as count from app.webhook_deliveries
        where endpoint_id = ${deadId} and ${where}`;
      return row?.count ?? 0;
    };
    try {
      await tickUntil(
        "each head failed once",
        async () => (await count(sql`attempts = 1 and last_error is not null`)) === 50,
      );
      expect(dead.requests()).toBe(50);
      // Every head waits an hour; nothing behind them is due.
      expect(await count(sql`status = 'pending' and run_at <= now()`)).toBe(0);
      expect(await count(sql`status = 'pending' and run_at = 'infinity'`)).toBe(950);

      // What a poll reads of the deliveries' table, from its transaction's own statistics
      // (pg_stat_xact_user_tables: this transaction's counts, no other session's). Before lines,
      // the 950 behind their heads were due, and every poll read and rejected each of them.
      // Sequential scans are off for the measure: on a table of 1,000 rows the planner may rightly
      // read all of its few pages, a choice that says nothing of the query's shape; at a year's
      // size the index is the only cheap path (bench:scale checks those plans with EXPLAIN).
      const read = await sql.begin(async (transaction) => {
        await transaction`set local enable_seqscan = off`;
        const tuplesRead = async () => {
          const [row] = await transaction<{ read: number }[]>`
            select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as read
            from pg_stat_xact_user_tables
            where schemaname = 'app' and relname = 'webhook_deliveries'`;
          return row?.read ?? 0;
        };
        const before = await tuplesRead();
        const taken = await takeDueDeliveries(transaction, {
          limit: 32,
          perEndpoint: 4,
          strangers: 16,
          sending: new Map(),
          leaseMs: 60_000,
        });
        expect(taken).toEqual([]);
        return (await tuplesRead()) - before;
      });
      expect(read).toBeLessThan(20);

      // A new line's head is due at once (and taken), the one behind it waits.
      await writeEvents("fresh", 200_000, 1, 2);
      await worker.tick();
      const fresh = await sql<{ waiting: boolean }[]>`
        select run_at = 'infinity' as waiting
        from app.webhook_deliveries where ordering_key = 'fresh:1' order by event_id`;
      expect(fresh).toEqual([{ waiting: false }, { waiting: true }]);

      // Line 1's head fails for good at its retry: the next of the line comes due. An operator
      // then sends the failed one again: it goes first, the next waits behind it once more.
      await sql`
        update app.webhook_deliveries set run_at = now()
        where endpoint_id = ${deadId} and ordering_key = 'dead:1' and run_at <> 'infinity'`;
      const [first] = await sql<{ id: bigint }[]>`
        select id from app.webhook_deliveries
        where endpoint_id = ${deadId} and ordering_key = 'dead:1' order by event_id limit 1`;
      await tickUntil(
        "line 1's head failed and the next tried",
        async () =>
          (await count(sql`ordering_key = 'dead:1' and status = 'failed'`)) === 1 &&
          (await count(sql`ordering_key = 'dead:1' and attempts = 1`)) === 1,
      );
      expect(await redeliver(sql, { deliveryIds: [first?.id as bigint] })).toBe(1);
      const line = await sql<{ due: boolean; waiting: boolean }[]>`
        select run_at <= now() as due, run_at = 'infinity' as waiting
        from app.webhook_deliveries
        where endpoint_id = ${deadId} and ordering_key = 'dead:1' order by event_id limit 2`;
      expect(line).toEqual([
        { due: true, waiting: false },
        { due: false, waiting: true },
      ]);

      // The receiver comes back and the hour passes: every line is delivered, in its order.
      alive = true;
      await sql`
        update app.webhook_deliveries set run_at = now()
        where endpoint_id = ${deadId} and status = 'pending' and run_at <> 'infinity'`;
      await tickUntil(
        "every delivery",
        async () => (await count(sql`status <> 'delivered'`)) === 0,
      );
      // The first arrival of each transfer, by line: 1 to 20 in order on each of the 50.
      const arrivals = new Map<number, number[]>();
      const seen = new Set<string>();
      for (const webhook of dead.received) {
        if (seen.has(webhook.id)) continue;
        seen.add(webhook.id);
        const { line, place } = lineAndPlace(webhook);
        if (line < 100 || line >= 200) continue;
        arrivals.set(line, [...(arrivals.get(line) ?? []), place]);
      }
      expect(arrivals.size).toBe(50);
      const inOrder = Array.from({ length: 20 }, (_, index) => index + 1).join();
      expect([...arrivals].filter(([, places]) => places.join() !== inOrder)).toEqual([]);
      // Line 1's first came again, after an operator's redelivery, marked so.
      const firstOfLine1 = `0x${(100_000 + 1_001).toString(16).padStart(64, "0")}`;
      expect(
        dead.received.find((webhook) => webhook.payload.data.tx_hash === firstOfLine1),
      ).toMatchObject({ redelivery: true, attempt: 1 });
    } finally {
      await worker.settle?.();
    }
  }, 180_000);
  it("gives strangers' endpoints half the slots, so claims pointing at a receiver that never answers leave the operator's the rest", async () => {
    const tarpit = await receiver({ answer: () => "handled" });
    const healthy = await receiver();
    await operatorEndpoint(healthy);
    // 20 claims' webhook_urls, all at the tarpit, each with a delivery due a minute before any
    // of the operator's.
    await writeEvents("stranger", 300_000, 20, 1);
    const strangers = Array.from({ length: 20 }, (_, index) => `we_stranger_${index + 1}`);
    const secret = newWebhookSecret();
    tarpit.secrets.push(secret);
    await sql`
      insert into app.webhook_endpoints (id, kind, url, secret, claim_id)
      select id, 'claim', ${tarpit.url}, ${secret}, 'claim_' || id
      from unnest(${strangers}::text[]) as id`;
    await sql`
      insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key, run_at)
      select v.id, 'we_stranger_' || split_part(v.ordering_key, ':', 2), v.ordering_key,
        now() - interval '1 minute'
      from app.events v where v.ordering_key like 'stranger:%'`;
    const deps = workerDeps({ WEBHOOK_TIMEOUT_MS: "120000", WEBHOOK_CONCURRENCY: "8" });
    const running = runWorker(
      { lockSession: workerLockSession(deps.config), notifications: sql },
      createWebhookWorker(deps, webhookTransport(deps.config.webhooks, systemResolve)),
      deps.logger,
    );
    try {
      // Were the strangers' deliveries taken as they come, all 8 slots would wait two minutes.
      await waitFor(() => healthy.received.length >= 20, {
        what: () => `the operator's 20 deliveries (${healthy.received.length} so far)`,
        timeoutMs: 30_000,
      });
      expect(tarpit.requests()).toBe(4);
    } finally {
      await running.stop();
    }
    await sql`delete from app.webhook_endpoints`;
  }, 60_000);

  it("writes an answer only for the attempt it answers, and a late failure never makes a failed delivery pending again", async () => {
    const target = await receiver();
    const endpointId = await operatorEndpoint(target);
    const [event] = await sql<{ id: bigint }[]>`
      insert into app.events (type, ordering_key, snapshot, fanned_out)
      values ('payment.unmatched', 'late:1', '{}'::jsonb, true) returning id`;
    // Attempt 1's lease ended unanswered: the delivery was taken again, attempt 2 in flight.
    const [delivery] = await sql<{ id: bigint }[]>`
      insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key, run_at, attempts)
      values (${String(event?.id)}, ${endpointId}, 'late:1', now() + interval '1 minute', 2)
      returning id`;
    const id = delivery?.id as bigint;
    const policy = { retryScheduleMs: [1_000, 1_000, 1_000], disableAfterMs: 86_400_000 };
    const state = async () => {
      const [row] = await sql<{ status: string; attempts: number; last_error: string | null }[]>`
        select status, attempts, last_error from app.webhook_deliveries where id = ${String(id)}`;
      return row;
    };
    const leased = { status: "pending", attempts: 2, last_error: null };
    // Attempt 1's answers, late: neither is attempt 2's.
    await recordDeliveryResults(
      sql,
      [
        {
          delivery: { id, attempts: 1, endpoint_id: endpointId },
          outcome: { ok: true, status: 200 },
        },
      ],
      policy,
    );
    expect(await state()).toEqual(leased);
    await recordDeliveryResults(
      sql,
      [
        {
          delivery: { id, attempts: 1, endpoint_id: endpointId },
          outcome: { ok: false, status: 500, error: "late" },
        },
      ],
      policy,
    );
    expect(await state()).toEqual(leased);
    // Nor does it count against the endpoint.
    const [endpoint] = await sql<{ failing_since: Date | null }[]>`
      select failing_since from app.webhook_endpoints where id = ${endpointId}`;
    expect(endpoint?.failing_since).toBeNull();
    // Its endpoint was disabled meanwhile, the delivery failed with it: attempt 2's failure,
    // when it comes, leaves it failed.
    await sql`
      update app.webhook_deliveries set status = 'failed', last_error = 'endpoint disabled'
      where id = ${String(id)}`;
    await recordDeliveryResults(
      sql,
      [
        {
          delivery: { id, attempts: 2, endpoint_id: endpointId },
          outcome: { ok: false, status: 500, error: "late" },
        },
      ],
      policy,
    );
    expect(await state()).toEqual({
      status: "failed",
      attempts: 2,
      last_error: "endpoint disabled",
    });
    await sql`delete from app.webhook_endpoints`;
  });

  it("redelivers a line's later delivery while its head's result is being written, and the later one comes due", async () => {
    const target = await receiver();
    const endpointId = await operatorEndpoint(target);
    const events = await sql<{ id: bigint }[]>`
      insert into app.events (type, ordering_key, snapshot, fanned_out)
      values ('payment.unmatched', 'race:1', '{}'::jsonb, true),
        ('payment.unmatched', 'race:1', '{}'::jsonb, true)
      returning id`;
    // The head in flight, the later one failed (its endpoint was disabled, say).
    const [head, later] = await sql<{ id: bigint }[]>`
      insert into app.webhook_deliveries
        (event_id, endpoint_id, ordering_key, run_at, attempts, status)
      values (${String(events[0]?.id)}, ${endpointId}, 'race:1', now() + interval '1 minute', 1,
          'pending'),
        (${String(events[1]?.id)}, ${endpointId}, 'race:1', now(), 1, 'failed')
      returning id`;
    let redelivering: Promise<number> | undefined;
    // The head's 2xx written as recordDeliveryResults writes it; an operator redelivers the
    // later one before that transaction commits.
    await sql.begin(async (transaction) => {
      await transaction`select pg_advisory_xact_lock_shared(${LOCK_KEYS.eventFanOut})`;
      await transaction`
        update app.webhook_deliveries set status = 'delivered', delivered_at = now()
        where id = ${String(head?.id)}`;
      await relineDeliveries(transaction, [{ endpoint_id: endpointId, ordering_key: "race:1" }]);
      let settled = false;
      redelivering = redeliver(sql, { deliveryIds: [later?.id as bigint] });
      redelivering.then(
        () => {
          settled = true;
        },
        () => {
          settled = true;
        },
      );
      await waitFor(
        async () => {
          if (settled) return true;
          const [waiting] = await sql<{ any: boolean }[]>`
            select exists (select 1 from pg_locks where locktype = 'advisory' and not granted)
              as any`;
          return waiting?.any ?? false;
        },
        { what: "the redelivery done or waiting for the fan-out lock", timeoutMs: 10_000 },
      );
    });
    expect(await redelivering).toBe(1);
    const [line] = await sql<{ status: string; waiting: boolean }[]>`
      select status, run_at = 'infinity' as waiting from app.webhook_deliveries
      where id = ${String(later?.id)}`;
    expect(line).toEqual({ status: "pending", waiting: false });
    await sql`delete from app.webhook_endpoints`;
  });

  it("wakes a delivery left waiting behind no one when it prunes", async () => {
    const target = await receiver();
    const endpointId = await operatorEndpoint(target);
    const [event] = await sql<{ id: bigint }[]>`
      insert into app.events (type, ordering_key, snapshot, fanned_out)
      values ('payment.unmatched', 'orphan:1', '{}'::jsonb, true) returning id`;
    // What a bug in the lines would leave: pending at 'infinity', nothing ahead of it.
    const [orphan] = await sql<{ id: bigint }[]>`
      insert into app.webhook_deliveries (event_id, endpoint_id, ordering_key, run_at)
      values (${String(event?.id)}, ${endpointId}, 'orphan:1', 'infinity') returning id`;
    const deps = workerDeps({});
    const worker = createWebhookWorker(deps, webhookTransport(deps.config.webhooks, systemResolve));
    try {
      await worker.tick();
      // Come due, and taken at once: its first attempt counted.
      const [row] = await sql<{ attempts: number; waiting: boolean }[]>`
        select attempts, run_at = 'infinity' as waiting from app.webhook_deliveries
        where id = ${String(orphan?.id)}`;
      expect(row).toEqual({ attempts: 1, waiting: false });
    } finally {
      await worker.settle?.();
    }
    await sql`delete from app.webhook_endpoints`;
  });
});
