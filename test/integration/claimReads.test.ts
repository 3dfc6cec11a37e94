import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { insertClaim } from "../../api/claims/insertClaim.ts";
import {
  type ClaimDetailsRow,
  gatherClaimReads,
  MOST_GATHERINGS_IN_FLIGHT,
} from "../../api/claims/readClaim.ts";
import { createCore } from "../../api/core/createCore.ts";
import { connectDatabase, type Database, type Sql } from "../../api/db/connect.ts";
import { createLogger } from "../../api/logger.ts";
import { devnetAccounts } from "../../scripts/devnet/accounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { testServiceConfig } from "../support/service.ts";

/**
 * Claim reads by id, gathered per turn of the event loop (GET /api/claims/{id} under many
 * pollers): one query for a turn's reads, each read its own claim and its own object, nothing
 * older than the request, and a failed query failing only the reads it carried.
 */

let database: TestDatabase;
let sql: Database;

const CLAIM_SETTINGS = {
  claims: {
    variant: "B" as const,
    lifetimeSeconds: 3600,
    expiryGraceSeconds: 0,
    amountHoldSeconds: 60,
    amountSpaceSize: 100,
    amountSpaceWarnRatio: 0.5,
    openClaimsPerClient: 0,
    expiryIntervalMs: 1000,
  },
};

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 4 });
});

afterAll(async () => {
  await sql?.end({ timeout: 1 });
  await database?.drop();
});

async function newClaimIds(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index++) {
    const inserted = await insertClaim(sql, CLAIM_SETTINGS, {
      flow: "claim",
      payoutAddress: getAddress(`0x${randomBytes(20).toString("hex")}`),
      agentName: `reader-${index}`,
    });
    if (inserted.type !== "created") throw new Error(`claim not created: ${inserted.type}`);
    ids.push(inserted.claim.id);
  }
  return ids;
}

interface ScriptedSql {
  sql: Sql;
  queries: () => number;
  /** The next `count` queries fail without reaching the database. */
  failNext: (count: number) => void;
  /** Queries wait here, not yet sent, until `release()`. */
  hold: () => void;
  release: () => void;
  /** Rows as the database answered them, changed before the reader sees them. */
  rewriteRows: (rewrite: ((rows: ClaimDetailsRow[]) => ClaimDetailsRow[]) | null) => void;
}

/** The same database, every query counted, and failed, held or rewritten when a test asks. */
function scriptedSql(): ScriptedSql {
  let queries = 0;
  let failures = 0;
  let held: Promise<void> | null = null;
  let releaseHeld = () => {};
  let rewrite: ((rows: ClaimDetailsRow[]) => ClaimDetailsRow[]) | null = null;
  const scripted = new Proxy(sql, {
    apply(target, thisArgument, argumentsList) {
      queries += 1;
      if (failures > 0) {
        failures -= 1;
        return Promise.reject(new Error("connection lost (test)"));
      }
      const send = async () => {
        const rows = (await Reflect.apply(
          target,
          thisArgument,
          argumentsList,
        )) as ClaimDetailsRow[];
        return rewrite ? rewrite([...rows]) : rows;
      };
      const gate = held;
      return gate ? gate.then(send) : send();
    },
  });
  return {
    sql: scripted,
    queries: () => queries,
    failNext: (count) => {
      failures = count;
    },
    hold: () => {
      held = new Promise((resolve) => {
        releaseHeld = resolve;
      });
    },
    release: () => {
      held = null;
      releaseHeld();
    },
    rewriteRows: (next) => {
      rewrite = next;
    },
  };
}

/** Resolves once `condition` holds, checked every turn of the event loop. */
async function untilTrue(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

describe("gathered claim reads", () => {
  it("reads a turn's claims in one query, each caller its own claim", async () => {
    const ids = await newClaimIds(5);
    const counted = scriptedSql();
    const read = gatherClaimReads(counted.sql);
    const unknown = "clm_unknown0000000000000000";

    const claims = await Promise.all([...ids, ids[0] as string, unknown].map((id) => read(id)));

    expect(counted.queries()).toBe(1);
    expect(claims.slice(0, 5).map((claim) => claim?.id)).toEqual(ids);
    expect(claims.slice(0, 5).map((claim) => claim?.agentName)).toEqual(
      ids.map((_, index) => `reader-${index}`),
    );
    // The same claim asked for twice: equal, but never one object shared by two callers.
    expect(claims[5]).toEqual(claims[0]);
    expect(claims[5]).not.toBe(claims[0]);
    expect(claims[6]).toBeNull();
  });

  it("reads again in a later turn and sees what was committed before it was asked", async () => {
    const [id] = (await newClaimIds(1)) as [string];
    const counted = scriptedSql();
    const read = gatherClaimReads(counted.sql);

    expect((await read(id))?.status).toBe("awaiting_payment");
    await sql`update app.claims set status = 'expired' where id = ${id}`;
    expect((await read(id))?.status).toBe("expired");
    expect(counted.queries()).toBe(2);
  });

  it("fails only the reads a failed query carried; the next turn reads afresh", async () => {
    const ids = await newClaimIds(3);
    const counted = scriptedSql();
    const read = gatherClaimReads(counted.sql);

    counted.failNext(1);
    const failed = await Promise.allSettled(ids.map((id) => read(id)));
    expect(failed.map((outcome) => outcome.status)).toEqual(["rejected", "rejected", "rejected"]);

    const again = await Promise.all(ids.map((id) => read(id)));
    expect(again.map((claim) => claim?.id)).toEqual(ids);
    expect(counted.queries()).toBe(2);
  });

  it("splits a very large turn into several queries, every read answered", async () => {
    const ids = await newClaimIds(3);
    const counted = scriptedSql();
    const read = gatherClaimReads(counted.sql);
    const unknownIds = Array.from({ length: 600 }, (_, index) => `clm_none${String(index)}`);

    const claims = await Promise.all([...unknownIds, ...ids].map((id) => read(id)));

    expect(counted.queries()).toBe(2);
    expect(claims.slice(600).map((claim) => claim?.id)).toEqual(ids);
    expect(claims.slice(0, 600).every((claim) => claim === null)).toBe(true);
  });

  it("never joins a query already sent: a later read gets its own and sees what was committed", async () => {
    const [id] = (await newClaimIds(1)) as [string];
    const scripted = scriptedSql();
    const read = gatherClaimReads(scripted.sql);

    scripted.hold();
    const first = read(id);
    await untilTrue(() => scripted.queries() === 1);
    scripted.release();
    expect((await first)?.status).toBe("awaiting_payment");

    // Held again: the first query is sent but not answered when the claim changes and a
    // second read is asked for.
    scripted.hold();
    const early = read(id);
    await untilTrue(() => scripted.queries() === 2);
    await sql`update app.claims set status = 'expired' where id = ${id}`;
    const late = read(id);
    await untilTrue(() => scripted.queries() === 3);
    scripted.release();
    expect((await late)?.status).toBe("expired");
    expect(["awaiting_payment", "expired"]).toContain((await early)?.status);
  });

  it("keeps at most a few gatherings in flight; reads asked meanwhile go out together", async () => {
    const ids = await newClaimIds(MOST_GATHERINGS_IN_FLIGHT + 3);
    const scripted = scriptedSql();
    const read = gatherClaimReads(scripted.sql);

    scripted.hold();
    const reads: Promise<unknown>[] = [];
    // One read per turn: each turn's gathering would be a query of its own.
    for (const id of ids.slice(0, MOST_GATHERINGS_IN_FLIGHT)) {
      reads.push(read(id));
      await untilTrue(() => scripted.queries() === reads.length);
    }
    // At the cap: these wait, gathered, while the others are in flight.
    for (const id of ids.slice(MOST_GATHERINGS_IN_FLIGHT)) {
      reads.push(read(id));
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(scripted.queries()).toBe(MOST_GATHERINGS_IN_FLIGHT);

    scripted.release();
    const claims = (await Promise.all(reads)) as ({ id: string } | null)[];
    expect(claims.map((claim) => claim?.id)).toEqual(ids);
    expect(scripted.queries()).toBe(MOST_GATHERINGS_IN_FLIGHT + 1);
  });

  it("fails only the readers of a row that cannot be read, and answers the others", async () => {
    const ids = (await newClaimIds(3)) as [string, string, string];
    const scripted = scriptedSql();
    const read = gatherClaimReads(scripted.sql);
    scripted.rewriteRows((rows) =>
      rows.map((row) => (row.id === ids[1] ? { ...row, amount_due: "not a number" } : row)),
    );

    const outcomes = await Promise.allSettled(ids.map((id) => read(id)));

    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    expect(scripted.queries()).toBe(1);
  });

  it("is what every surface reads a claim with (core.getClaim)", async () => {
    const ids = await newClaimIds(3);
    const scripted = scriptedSql();
    const config = testServiceConfig(
      { rpcUrl: "http://127.0.0.1:9", accounts: devnetAccounts() },
      database.url,
    );
    const core = createCore(
      {
        sql: scripted.sql as Database,
        config,
        chain: createChainReader(config.chain.rpcUrl, config.chain.chainId),
        logger: createLogger("silent", "test"),
      },
      null,
    );

    const results = await Promise.all(ids.map((id) => core.getClaim(id)));

    expect(results.map((result) => (result.type === "claim" ? result.claim.id : null))).toEqual(
      ids,
    );
    expect(scripted.queries()).toBe(1);

    // The whole answer: an open claim is not final, and reads no receipt.
    const [first] = ids as [string];
    const whole = await core.getClaimWithReceipt(first);
    expect(whole).toMatchObject({ type: "claim", final: false, receipt: null });
    expect(whole.type === "claim" && whole.claim.status).toBe("awaiting_payment");
    expect(scripted.queries()).toBe(2);
    expect(await core.getClaimWithReceipt("clm_nothing")).toEqual({
      type: "claim_not_found",
      claimId: "clm_nothing",
    });
  });
});
