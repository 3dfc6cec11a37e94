import { randomBytes } from "node:crypto";
import { type Address, getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InsertClaimResult, NewClaim } from "../../api/claims/insertClaim.ts";
import { gatherClaimCreations } from "../../api/claims/openClaims.ts";
import { connectDatabase, type Database, type Sql } from "../../api/db/connect.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

/**
 * Claim creations gathered per turn of the event loop (POST /api/claims under many clients):
 * one call for a turn's creations, each claim born as it would be by itself (its own id and
 * unique amount, the open claim given back to the same request, the client's cap), and a call
 * that fails answered claim by claim instead.
 */

let database: TestDatabase;
let sql: Database;

function settings(variant: "A" | "B", openClaimsPerClient = 0) {
  return {
    claims: {
      variant,
      lifetimeSeconds: 3600 * 24 * 7,
      expiryGraceSeconds: 0,
      amountHoldSeconds: 60,
      amountSpaceSize: 999_999,
      amountSpaceWarnRatio: 0.5,
      openClaimsPerClient,
      expiryIntervalMs: 1000,
    },
  };
}

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 4 });
});

afterAll(async () => {
  await sql?.end({ timeout: 1 });
  await database?.drop();
});

/** The same database, every statement counted. */
function countedSql(): { sql: Sql; statements: () => number } {
  let statements = 0;
  const counted = new Proxy(sql, {
    apply(target, thisArgument, argumentsList) {
      statements += 1;
      return Reflect.apply(target, thisArgument, argumentsList);
    },
  });
  return { sql: counted, statements: () => statements };
}

const newAddress = (): Address => getAddress(`0x${randomBytes(20).toString("hex")}`);

function claimRequest(overrides: Partial<NewClaim> = {}): NewClaim {
  return {
    flow: "claim",
    payoutAddress: newAddress(),
    agentName: "batch",
    reuseMinLifeSeconds: 3600,
    ...overrides,
  };
}

type Created = Exclude<InsertClaimResult, { type: "too_many_open_claims" }>;

function created(result: InsertClaimResult): Created {
  if (result.type === "too_many_open_claims") throw new Error("not created");
  return result;
}

describe("gathered claim creations", () => {
  it("opens a turn's claims in one call, each with its own id and unique amount", async () => {
    const counted = countedSql();
    const open = gatherClaimCreations(counted.sql, settings("A"));
    const requests = Array.from({ length: 40 }, () => claimRequest());

    const results = (await Promise.all(requests.map(open))).map(created);

    expect(counted.statements()).toBe(1);
    expect(results.map((result) => result.type)).toEqual(requests.map(() => "created"));
    expect(results.map((result) => result.claim.payoutAddress)).toEqual(
      requests.map((request) => request.payoutAddress.toLowerCase()),
    );
    expect(new Set(results.map((result) => result.claim.id)).size).toBe(40);
    const amounts = results.map((result) => result.claim.amountDue);
    expect(new Set(amounts).size).toBe(40);
    for (const amount of amounts) {
      expect(amount).toBeGreaterThan(PRICE_ATOMIC);
      expect(amount).toBeLessThan(PRICE_ATOMIC + 1_000_000n);
    }
    // Each claim holds its own amount, as a claim opened by itself does.
    const held = await sql<{ claim_id: string; amount: string }[]>`
      select claim_id, amount::text from app.amount_reservations
      where claim_id = any(${results.map((result) => result.claim.id)})`;
    expect(new Map(held.map((row) => [row.claim_id, BigInt(row.amount)]))).toEqual(
      new Map(results.map((result) => [result.claim.id, result.claim.amountDue])),
    );
  });

  it("gives the same request in the same turn the claim it opened, and a differing one its own", async () => {
    const open = gatherClaimCreations(sql, settings("B"));
    const first = claimRequest();
    const again = { ...first };
    const otherName = { ...first, agentName: "another" };

    const [opened, reused, other] = (
      await Promise.all([open(first), open(again), open(otherName)])
    ).map(created) as [Created, Created, Created];

    expect(opened.type).toBe("created");
    expect(reused).toMatchObject({ type: "reused", claim: { id: opened.claim.id } });
    expect(other.type).toBe("created");
    expect(other.claim.id).not.toBe(opened.claim.id);
    expect(opened.claim.amountDue).toBe(PRICE_ATOMIC);
  });

  it("holds a client to its cap of open claims within one call", async () => {
    const counted = countedSql();
    const open = gatherClaimCreations(counted.sql, settings("A", 3));
    const clientKey = randomBytes(16).toString("hex");

    const results = await Promise.all(
      Array.from({ length: 6 }, () => open(claimRequest({ clientKey }))),
    );

    expect(counted.statements()).toBe(1);
    expect(results.map((result) => result.type)).toEqual([
      "created",
      "created",
      "created",
      "too_many_open_claims",
      "too_many_open_claims",
      "too_many_open_claims",
    ]);
    const [open_] = await sql<{ n: number }[]>`
      select count(*)::int as n from app.claims where client_key = ${clientKey}`;
    expect(open_?.n).toBe(3);
  });

  it("opens a call's claims one by one when the call fails, keeping nothing of it", async () => {
    const counted = countedSql();
    const open = gatherClaimCreations(counted.sql, settings("A"));
    const requests = Array.from({ length: 5 }, () => claimRequest());
    // The batch function gone for a moment: the call fails as a lost connection would.
    await sql`alter function app.create_claims(jsonb, integer, numeric) rename to create_claims_away`;
    let results: InsertClaimResult[];
    try {
      results = await Promise.all(requests.map(open));
    } finally {
      await sql`alter function app.create_claims_away(jsonb, integer, numeric) rename to create_claims`;
    }

    expect(counted.statements()).toBe(1 + requests.length);
    expect(results.map((result) => created(result).claim.payoutAddress)).toEqual(
      requests.map((request) => request.payoutAddress.toLowerCase()),
    );
    const [stored] = await sql<{ n: number }[]>`
      select count(*)::int as n from app.claims
      where payout_address = any(${requests.map((request) => request.payoutAddress.toLowerCase())})`;
    expect(stored?.n).toBe(requests.length);
  });

  it("sends a creation asked for alone by itself, and one asked for later in a call of its own", async () => {
    const counted = countedSql();
    const open = gatherClaimCreations(counted.sql, settings("B"));

    const alone = created(await open(claimRequest()));
    const [later] = await Promise.all([open(claimRequest())]);

    expect(alone.type).toBe("created");
    expect(created(later as InsertClaimResult).type).toBe("created");
    expect(counted.statements()).toBe(2);
  });

  it("holds every client's cap across two replicas creating for the same clients and addresses at once", async () => {
    const replicas = [
      gatherClaimCreations(sql, settings("A", 4)),
      gatherClaimCreations(sql, settings("A", 4)),
    ];
    const clients = Array.from({ length: 5 }, () => randomBytes(16).toString("hex"));
    const addresses = Array.from({ length: 7 }, newAddress);
    // Distinct agent names: no request is the same as another, so none is given back.
    const requests = Array.from({ length: 300 }, (_, index) =>
      claimRequest({
        clientKey: clients[index % clients.length] as string,
        payoutAddress: addresses[index % addresses.length] as Address,
        agentName: `replica-${index}`,
      }),
    );

    const results = await Promise.all(
      requests.map((request, index) => (replicas[index % 2] as (typeof replicas)[0])(request)),
    );

    const opened = await sql<{ client_key: string; n: number }[]>`
      select client_key, count(*)::int as n from app.claims
      where client_key = any(${clients}) group by client_key`;
    expect(opened.map((row) => row.n)).toEqual(clients.map(() => 4));
    expect(results.filter((result) => result.type === "created")).toHaveLength(20);
    expect(results.filter((result) => result.type === "too_many_open_claims")).toHaveLength(280);
  });
});
