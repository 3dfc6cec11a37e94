import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { connectDatabase } from "../../api/db/connect.ts";
import { checkHealth } from "../../api/health/checkHealth.ts";
import type { HealthJson as HealthReport } from "../../api/schemas/health.ts";
import type { RunningService } from "../../api/service.ts";
import { startAnvil } from "../../scripts/devnet/anvil.ts";
import type { RunningPonder } from "../../scripts/devnet/ponder.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import { startTestIndexer } from "../support/indexer.ts";
import { freePort } from "../support/ports.ts";
import { startTestService } from "../support/service.ts";
import { holdTableLock } from "../support/tableLock.ts";
import { waitFor } from "../support/waitFor.ts";

let chain: TestChain;
let database: TestDatabase;
let ponder: RunningPonder;
let service: RunningService;
let chainWithDatabase: ChainWithDatabase | undefined;

beforeAll(async () => {
  ({ chain, database } = chainWithDatabase = await startChainWithDatabase());
  ponder = await startTestIndexer(chain, database.url);
  service = await startTestService(chain, database.url);
});

afterAll(async () => {
  await service?.stop();
  await ponder?.stop();
  await chainWithDatabase?.stop();
});

async function health(url: string) {
  const response = await fetch(`${url}/api/health`);
  return { status: response.status, body: (await response.json()) as HealthReport };
}

describe("GET /api/health", () => {
  it("reports the database, the chain head and the indexer's progress", async () => {
    await chain.testClient.mine({ blocks: 3 });
    const head = Number(await chain.publicClient.getBlockNumber());

    const { status, body } = await waitFor(
      async () => {
        const answer = await health(service.url);
        return (answer.body.indexer.indexed_block ?? -1) >= head ? answer : undefined;
      },
      { what: "the indexer to reach the head" },
    );

    expect(status).toBe(200);
    expect(body).toMatchObject({
      status: "ok",
      reasons: [],
      database: { ok: true },
      chain: { ok: true, chain_id: 8453 },
      indexer: { ok: true, lag_blocks: 0 },
    });
    expect(body.chain.head_block).toBeGreaterThanOrEqual(head);
  });

  it("starts while the RPC is down, answers 503, and recovers when it is back", async () => {
    const rpcPort = await freePort();
    const stranded = await startTestService(
      { ...chain, rpcUrl: `http://127.0.0.1:${rpcPort}` },
      database.url,
    );
    try {
      const down = await health(stranded.url);
      expect(down.status).toBe(503);
      expect(down.body.status).toBe("down");
      expect(down.body.reasons).toContain("rpc_unreachable");
      expect(down.body.chain).toMatchObject({ ok: false, head_block: null });

      const anvil = await startAnvil({ port: rpcPort, chainId: 8453 });
      try {
        const recovered = await waitFor(
          async () => {
            const answer = await health(stranded.url);
            return answer.status === 200 ? answer : undefined;
          },
          { what: "health to recover" },
        );
        expect(recovered.body.reasons).not.toContain("rpc_unreachable");
        expect(recovered.body.chain.ok).toBe(true);
      } finally {
        await anvil.stop();
      }
    } finally {
      await stranded.stop();
    }
  });

  it("is down when the database cannot be reached", async () => {
    const unreachable = connectDatabase(`postgres://postgres@127.0.0.1:${await freePort()}/none`);
    try {
      const report = await checkHealth({
        sql: unreachable,
        chain: createChainReader(chain.rpcUrl, 8453),
        chainId: 8453,
        maxIndexerLagBlocks: 10,
      });
      expect(report.status).toBe("down");
      expect(report.reasons).toContain("database_unreachable");
      expect(report.database.ok).toBe(false);
      expect(report.chain.ok).toBe(true);
    } finally {
      await unreachable.end({ timeout: 1 });
    }
  });

  it("says when what waits for a person cannot be read in time, instead of reporting none", async () => {
    const sql = connectDatabase(database.url, { max: 2 });
    const holder = connectDatabase(database.url, { max: 1 });
    const check = () =>
      checkHealth({
        sql,
        chain: createChainReader(chain.rpcUrl, 8453),
        chainId: 8453,
        maxIndexerLagBlocks: 10,
        timeoutMs: 500,
      });
    try {
      const readable = await check();
      expect(readable.reasons).not.toContain("attention_unreadable");
      expect(readable.attention).not.toBeNull();
      // A table the attention check counts is held (a long migration, a vacuum full).
      const lock = await holdTableLock(holder, "app.x402_payments");
      const report = await check().finally(() => lock.release());
      expect(report.attention).toBeNull();
      expect(report.reasons).toContain("attention_unreadable");
      expect(report.status).toBe("degraded");
    } finally {
      await holder.end();
      await sql.end({ timeout: 1 });
    }
  });

  it("is down when the RPC serves another chain", async () => {
    const sql = connectDatabase(database.url, { max: 1 });
    const report = await checkHealth({
      sql,
      chain: createChainReader(chain.rpcUrl, 8453),
      chainId: 1,
      maxIndexerLagBlocks: 10,
    }).finally(() => sql.end());
    expect(report.status).toBe("down");
    expect(report.reasons).toContain("rpc_wrong_chain");
  });
});
