import { type Hex, parseTransaction } from "viem";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Database } from "../../api/db/connect.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  claimStatuses,
  countByRecipient,
  createPaidClaims,
  type PaidClaim,
  payoutRows,
  payoutTransfers,
  waitForStatus,
} from "../support/payouts.ts";
import { type RpcCall, startRpcProxy } from "../support/rpcProxy.ts";
import { testServiceEnv } from "../support/service.ts";
import {
  ANNOUNCING_LOG_LEVEL,
  type ServiceProcess,
  startServiceProcess,
} from "../support/serviceProcess.ts";
import { waitFor } from "../support/waitFor.ts";

let chain: TestChain;
let database: TestDatabase;
let sql: Database;
let chainWithDatabase: ChainWithDatabase | undefined;
const running: ServiceProcess[] = [];

// Each test starts two service processes, ~2 s each alone and 30 s and more in a busy whole
// run (BENCHMARKS.md#test-suite); a test takes 4-7 s alone, under 1 s of it after its restart
// is running. Waits for what a restarted worker does start once it runs (runningWorker), so
// they keep their usual bounds; only the whole test's covers two starts on a busy machine.
vi.setConfig({ testTimeout: 120_000 });

beforeAll(async () => {
  ({ chain, database, sql } = chainWithDatabase = await startChainWithDatabase({ migrate: true }));
});

afterAll(async () => {
  await Promise.all(running.map((service) => service.stop()));
  await chainWithDatabase?.stop();
});

/** A worker-only service process; re-broadcast and replacement timers far away. */
function startWorker(
  crashAt?: "after_payouts_signed" | "after_payouts_broadcast" | "after_next_round_signed",
  settings: Record<string, string> = {},
) {
  const service = startServiceProcess(
    testServiceEnv(chain, database.url, {
      ROLE: "worker",
      LOG_LEVEL: ANNOUNCING_LOG_LEVEL,
      PAYOUT_INTERVAL_MS: "50",
      PAYOUT_REBROADCAST_SECONDS: "600",
      PAYOUT_REPLACE_SECONDS: "600",
      ...(crashAt ? { CRASH_AT: crashAt } : {}),
      ...settings,
    }),
  );
  running.push(service);
  return service;
}

/**
 * A worker-only service process whose loops all had their first tick: its start is waited
 * for under the start's own wide bound, so the waits that follow are for what it does.
 */
async function runningWorker(settings: Record<string, string> = {}) {
  const service = startWorker(undefined, settings);
  await service.workersRunning();
  return service;
}

async function expectKilled(service: ServiceProcess) {
  const exit = await service.exited;
  expect(exit, service.output()).toEqual({ code: null, signal: "SIGKILL" });
}

async function payoutsOf(claims: PaidClaim[]) {
  const ids = new Set(claims.map((claim) => claim.id));
  return (await payoutRows(sql)).filter((payout) => ids.has(payout.claim_id));
}

async function expectPool(hashes: Hex[], pooled: boolean) {
  for (const hash of hashes) {
    const found = await chain.publicClient.getTransaction({ hash }).then(
      (transaction) => transaction.blockNumber === null,
      () => false,
    );
    expect(found, hash).toBe(pooled);
  }
}

/** Completed, each paid once on chain, by the very transaction signed before the crash. */
async function expectPaidOnceBy(claims: PaidClaim[], signed: Map<string, Hex>) {
  await waitForStatus(
    sql,
    claims.map((claim) => claim.id),
    "completed",
  );
  const transfers = await payoutTransfers(chain);
  const counts = countByRecipient(transfers);
  for (const claim of claims) {
    expect(counts.get(claim.payoutAddress)).toBe(1);
    const transfer = transfers.find((candidate) => candidate.to === claim.payoutAddress);
    expect(transfer?.txHash).toBe(signed.get(claim.id));
  }
  const attempts = await sql<{ count: bigint }[]>`
    select count(*) from app.payout_attempts
    where claim_id = any(${sql.array(claims.map((claim) => claim.id))}::text[])`;
  expect(attempts[0]?.count).toBe(BigInt(claims.length));
}

describe("payouts across a crash", () => {
  it("after signing: nothing on chain; the restart sends the stored bytes once", async () => {
    const claims = await createPaidClaims(sql, 6);
    const nonceBefore = await chain.publicClient.getTransactionCount({
      address: chain.payout.address,
      blockTag: "pending",
    });

    await expectKilled(startWorker("after_payouts_signed"));
    const signed = await payoutsOf(claims);
    expect(signed).toHaveLength(claims.length);
    for (const payout of signed) expect(payout).toMatchObject({ status: "signed", broadcasts: 0 });
    const statuses = await claimStatuses(
      sql,
      claims.map((claim) => claim.id),
    );
    expect([...statuses.values()].every((status) => status === "paying")).toBe(true);
    // Signed and committed, never sent: neither mined nor pooled, the nonce unused.
    expect(
      await chain.publicClient.getTransactionCount({
        address: chain.payout.address,
        blockTag: "pending",
      }),
    ).toBe(nonceBefore);
    await expectPool(
      signed.map((payout) => payout.tx_hash),
      false,
    );

    const restarted = await runningWorker();
    await expectPaidOnceBy(
      claims,
      new Map(signed.map((payout) => [payout.claim_id, payout.tx_hash])),
    );
    await restarted.stop();
  });

  it("after broadcasting, restarted while still pooled: re-sent byte for byte, mined once", async () => {
    await chain.testClient.setAutomine(false);
    try {
      const claims = await createPaidClaims(sql, 6);
      await expectKilled(startWorker("after_payouts_broadcast"));
      // Sent, but the process died before storing anything about it.
      const sent = await payoutsOf(claims);
      expect(sent).toHaveLength(claims.length);
      for (const payout of sent) expect(payout).toMatchObject({ status: "signed", broadcasts: 0 });
      await expectPool(
        sent.map((payout) => payout.tx_hash),
        true,
      );

      const restarted = await runningWorker();
      // Reconciliation re-sends the same bytes; the node already has them ("already known").
      await waitFor(
        async () =>
          (await payoutsOf(claims)).every(
            (payout) => payout.status === "broadcast" && payout.broadcasts === 1,
          ),
        { what: "the restarted sender to re-broadcast the pooled payouts" },
      );
      await chain.testClient.mine({ blocks: 1 });
      await expectPaidOnceBy(
        claims,
        new Map(sent.map((payout) => [payout.claim_id, payout.tx_hash])),
      );
      await restarted.stop();
    } finally {
      await chain.testClient.setAutomine(true);
    }
  });

  it("with a round stored while the one before is still on its way: the node gets both once, in nonce order", async () => {
    await chain.testClient.setAutomine(false);
    const proxy = await startRpcProxy(chain.rpcUrl);
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      const claims = await createPaidClaims(sql, 6);
      const firstNonce = await chain.publicClient.getTransactionCount({
        address: chain.payout.address,
        blockTag: "pending",
      });
      // The first round's transactions wait at the proxy; the process dies once the second
      // round is stored; only then do they reach the node (sent, nothing stored of it).
      const firstRound = (call: RpcCall) =>
        call.method === "eth_sendRawTransaction" &&
        (parseTransaction(call.params[0] as Hex).nonce ?? -1) < firstNonce + 3;
      // The second round's nonce read waits until the first round's sends have reached the
      // proxy, so the process cannot die before they left it.
      let sendsArrived = () => {};
      const firstRoundArrived = new Promise<void>((resolve) => {
        sendsArrived = resolve;
      });
      let sendsSeen = 0;
      let pendingReads = 0;
      proxy.rule = (call) => {
        if (firstRound(call)) {
          sendsSeen += 1;
          if (sendsSeen === 3) sendsArrived();
          return { kind: "hold", until: held };
        }
        if (call.method === "eth_getTransactionCount" && call.params[1] === "pending") {
          pendingReads += 1;
          if (pendingReads > 1) return { kind: "hold", until: firstRoundArrived };
        }
        return { kind: "pass" };
      };
      await expectKilled(
        startWorker("after_next_round_signed", { RPC_URL: proxy.url, PAYOUT_BATCH_SIZE: "3" }),
      );
      const stored = await payoutsOf(claims);
      expect(stored.map((payout) => payout.status)).toEqual(Array(6).fill("signed"));
      release();
      await waitFor(
        async () =>
          (await chain.publicClient.getTransactionCount({
            address: chain.payout.address,
            blockTag: "pending",
          })) ===
          firstNonce + 3,
        { what: "the first round to reach the node after the crash" },
      );
      await expectPool(
        stored.slice(0, 3).map((payout) => payout.tx_hash),
        true,
      );
      await expectPool(
        stored.slice(3).map((payout) => payout.tx_hash),
        false,
      );

      const start = proxy.calls.length;
      const restarted = await runningWorker({ RPC_URL: proxy.url, PAYOUT_BATCH_SIZE: "3" });
      await waitFor(
        async () => (await payoutsOf(claims)).every((payout) => payout.status === "broadcast"),
        { what: "the restarted sender to send both rounds" },
      );
      const sent = proxy.calls
        .slice(start)
        .filter((call) => call.method === "eth_sendRawTransaction")
        .map((call) => parseTransaction(call.params[0] as Hex).nonce);
      expect(sent).toEqual(stored.map((payout) => Number(payout.nonce)));
      await chain.testClient.mine({ blocks: 1 });
      await expectPaidOnceBy(
        claims,
        new Map(stored.map((payout) => [payout.claim_id, payout.tx_hash])),
      );
      await restarted.stop();
    } finally {
      release();
      await proxy.stop();
      await chain.testClient.setAutomine(true);
    }
  });

  it("after broadcasting, mined while down: the restart only confirms them", async () => {
    await chain.testClient.setAutomine(false);
    const claims = await createPaidClaims(sql, 6);
    try {
      await expectKilled(startWorker("after_payouts_broadcast"));
    } finally {
      await chain.testClient.setAutomine(true);
    }
    await chain.testClient.mine({ blocks: 1 });
    const sent = await payoutsOf(claims);
    expect(sent.every((payout) => payout.status === "signed")).toBe(true);

    const restarted = await runningWorker();
    await expectPaidOnceBy(
      claims,
      new Map(sent.map((payout) => [payout.claim_id, payout.tx_hash])),
    );
    await restarted.stop();
  });

  it("on start, re-sends at once a broadcast payout the node lost while the service was down", async () => {
    await chain.testClient.setAutomine(false);
    try {
      const claims = await createPaidClaims(sql, 3);
      const first = await runningWorker();
      const sent = await waitFor(
        async () => {
          const payouts = await payoutsOf(claims);
          return payouts.length === claims.length &&
            payouts.every((payout) => payout.status === "broadcast")
            ? payouts
            : undefined;
        },
        { what: "the first worker to broadcast the round" },
      );
      await first.stop();
      // The node forgets them (a restart, a full pool); the re-broadcast timer is 10 min away.
      for (const payout of sent) await chain.testClient.dropTransaction({ hash: payout.tx_hash });
      await expectPool(
        sent.map((payout) => payout.tx_hash),
        false,
      );

      const restarted = await runningWorker();
      await waitFor(
        async () => {
          for (const payout of sent) {
            const pooled = await chain.publicClient.getTransaction({ hash: payout.tx_hash }).then(
              () => true,
              () => false,
            );
            if (!pooled) return false;
          }
          return true;
        },
        { what: "reconciliation to re-send the lost payouts" },
      );
      await chain.testClient.mine({ blocks: 1 });
      await expectPaidOnceBy(
        claims,
        new Map(sent.map((payout) => [payout.claim_id, payout.tx_hash])),
      );
      await restarted.stop();
    } finally {
      await chain.testClient.setAutomine(true);
    }
  });
});
