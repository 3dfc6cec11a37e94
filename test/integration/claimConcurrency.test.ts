import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import type { CreateClaimResult } from "../../api/claims/createClaim.ts";
import { createCore } from "../../api/core/createCore.ts";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { createLogger } from "../../api/logger.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { devnetAccounts } from "../../scripts/devnet/accounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { testServiceConfig } from "../support/service.ts";

/**
 * Claim creation under parallel requests, on a pool wide enough for them to meet in the
 * database: every unique amount belongs to one open claim, identical requests share one claim,
 * and one client's requests stay within OPEN_CLAIMS_PER_CLIENT. (No chain: no tx hash is named.)
 */

const SPACE = 40;
const CAP = 3;
const PARALLEL = 60;
let database: TestDatabase;
let sql: Database;
let core: ReturnType<typeof createCore>;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 20 });
  const config = testServiceConfig(
    { rpcUrl: "http://127.0.0.1:9", accounts: devnetAccounts() },
    database.url,
    {
      MATCHING_VARIANT: "A",
      AMOUNT_SPACE_SIZE: String(SPACE),
      OPEN_CLAIMS_PER_CLIENT: String(CAP),
    },
  );
  const deps = {
    sql,
    config,
    chain: createChainReader(config.chain.rpcUrl, config.chain.chainId),
    logger: createLogger("silent", "test"),
  };
  core = createCore(deps, null);
});

afterAll(async () => {
  await sql?.end({ timeout: 1 });
  await database?.drop();
});

function freshPayoutAddress(): string {
  return getAddress(`0x${randomBytes(20).toString("hex")}`);
}

function created(result: CreateClaimResult) {
  if (result.type !== "created") throw new Error(`not created: ${JSON.stringify(result)}`);
  return result;
}

describe("claims created at once", () => {
  it("never give one unique amount to two open claims", async () => {
    // More requests than amounts: many of them try the same candidates at the same moment.
    // allSettled: every request has ended before the next test, whatever this one finds.
    const settled = await Promise.allSettled(
      Array.from({ length: PARALLEL }, (_, index) =>
        core.createClaim(
          { payout_address: freshPayoutAddress() },
          { client: `ip:198.51.100.${index}` },
        ),
      ),
    );
    const failures = settled.flatMap((outcome) =>
      outcome.status === "rejected" ? [String(outcome.reason)] : [],
    );
    expect(failures).toEqual([]);
    const claims = settled.map(
      (outcome) => created((outcome as PromiseFulfilledResult<CreateClaimResult>).value).claim,
    );
    expect(claims.every((claim) => claim.status === "awaiting_payment")).toBe(true);
    const unique = claims.filter((claim) => claim.amountDue !== PRICE_ATOMIC);
    expect(unique.length).toBeGreaterThan(0);
    expect(unique.length).toBeLessThanOrEqual(SPACE);
    expect(new Set(unique.map((claim) => claim.amountDue)).size).toBe(unique.length);

    // What the database holds agrees: each such amount reserved for exactly the claim showing it.
    const shared = await sql`
      select amount_due from app.claims
      where status = 'awaiting_payment' and amount_due <> ${String(PRICE_ATOMIC)}
      group by amount_due having count(*) > 1`;
    expect(shared).toEqual([]);
    const [held] = await sql<{ reserved: number }[]>`
      select count(*)::int as reserved from app.claims c
      join app.amount_reservations r on r.amount = c.amount_due and r.claim_id = c.id
      where c.id = any(${unique.map((claim) => claim.id)})`;
    expect(held?.reserved).toBe(unique.length);
  });

  it("give identical requests one claim, and one unique amount", async () => {
    const body = { payout_address: freshPayoutAddress(), agent_name: "impatient" };
    const results = await Promise.all(
      Array.from({ length: 12 }, () => core.createClaim(body, { client: "ip:203.0.113.7" })),
    );
    const answers = results.map(created);
    expect(new Set(answers.map((answer) => answer.claim.id)).size).toBe(1);
    expect(answers.filter((answer) => !answer.reused)).toHaveLength(1);
    const [row] = await sql<{ open: number }[]>`
      select count(*)::int as open from app.claims
      where payout_address = ${body.payout_address.toLowerCase()}`;
    expect(row?.open).toBe(1);
  });

  it("open at most OPEN_CLAIMS_PER_CLIENT for one client, the rest refused", async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        core.createClaim({ payout_address: freshPayoutAddress() }, { client: "ip:192.0.2.9" }),
      ),
    );
    expect(results.filter((result) => result.type === "created")).toHaveLength(CAP);
    const refused = results.filter((result) => result.type === "too_many_open_claims");
    expect(refused).toHaveLength(12 - CAP);
    expect(refused[0]).toEqual({ type: "too_many_open_claims", limit: CAP });
  });
});

describe("an amount whose hold has run out", () => {
  it("goes to the next claim before the sweeper has removed the hold, and leaves the old one", async () => {
    const own = await createTestDatabase();
    const pool = connectDatabase(own.url, { max: 2 });
    try {
      const config = testServiceConfig(
        { rpcUrl: "http://127.0.0.1:9", accounts: devnetAccounts() },
        own.url,
        // One amount: whoever holds it, the next claim gets the plain price, or the taken-over
        // amount. A cap beyond PostgreSQL's integer is still a cap (the setting allows it).
        { MATCHING_VARIANT: "A", AMOUNT_SPACE_SIZE: "1", OPEN_CLAIMS_PER_CLIENT: "3000000000" },
      );
      const oneAmount = createCore(
        {
          sql: pool,
          config,
          chain: createChainReader(config.chain.rpcUrl, config.chain.chainId),
          logger: createLogger("silent", "test"),
        },
        null,
      );
      const client = { client: "ip:203.0.113.7" };
      const first = created(
        await oneAmount.createClaim({ payout_address: freshPayoutAddress() }, client),
      ).claim;
      expect(first.amountDue).not.toBe(PRICE_ATOMIC);
      const whileHeld = created(
        await oneAmount.createClaim({ payout_address: freshPayoutAddress() }, client),
      ).claim;
      expect(whileHeld.amountDue).toBe(PRICE_ATOMIC);

      // The first claim expired and its hold ran out; no expiry worker runs here.
      await pool`update app.claims set expires_at = now() - interval '2 hours' where id = ${first.id}`;
      await pool`
        update app.amount_reservations set held_until = now() - interval '1 second'
        where claim_id = ${first.id}`;
      const next = created(
        await oneAmount.createClaim({ payout_address: freshPayoutAddress() }, client),
      ).claim;
      expect(next.amountDue).toBe(first.amountDue);
      const holders = await pool<{ claim_id: string }[]>`
        select claim_id from app.amount_reservations where amount = ${String(first.amountDue)}`;
      expect(holders).toEqual([{ claim_id: next.id }]);
    } finally {
      await pool.end({ timeout: 1 });
      await own.drop();
    }
  });
});
