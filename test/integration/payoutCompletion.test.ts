import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import {
  claimStatuses,
  createPaidClaims,
  createPayoutHarness,
  type PaidClaim,
} from "../support/payouts.ts";

/**
 * The confirmer completes a round's mined payouts together (a burst is thousands): should that
 * fail for one claim, the others are completed one by one all the same, and the one that
 * failed is left `paying` with its payout not yet stored as confirmed, to be retried.
 * The payout workers are driven tick by tick on an automining chain.
 */

let chain: TestChain;
let chainWithDatabase: ChainWithDatabase | undefined;
let harness: Awaited<ReturnType<typeof createPayoutHarness>>;

beforeAll(async () => {
  ({ chain } = chainWithDatabase = await startChainWithDatabase());
  harness = await createPayoutHarness(chain, chainWithDatabase.database.url);
});

afterAll(async () => {
  await harness?.stop();
  await chainWithDatabase?.stop();
});

async function payoutStatuses(claims: PaidClaim[]): Promise<Map<string, string>> {
  const rows = await harness.sql<{ claim_id: string; status: string }[]>`
    select claim_id, status from app.payouts where claim_id = any(${claims.map((c) => c.id)})`;
  return new Map(rows.map((row) => [row.claim_id, row.status]));
}

describe("completing a round of mined payouts", () => {
  it("completes the whole round in one statement per table, not one per claim", async () => {
    const claims = await createPaidClaims(harness.sql, 5, {
      email: (index) => (index % 2 === 0 ? `holder${index}@example.com` : null),
    });
    await harness.sender.tick();
    // Counts the statements that write claims and receipts from here on.
    await harness.sql.unsafe(`
      create table app.test_statements (target text not null);
      create function app.count_statement() returns trigger language plpgsql as $$
      begin insert into app.test_statements values (tg_table_name); return null; end $$;
      create trigger count_claim_statements after update on app.claims
        for each statement execute function app.count_statement();
      create trigger count_receipt_statements after insert on app.receipts
        for each statement execute function app.count_statement();`);
    try {
      await harness.confirmer.tick();

      const statuses = await claimStatuses(
        harness.sql,
        claims.map((claim) => claim.id),
      );
      for (const claim of claims) expect(statuses.get(claim.id)).toBe("completed");
      const counted = await harness.sql<{ target: string; n: number }[]>`
        select target, count(*)::int as n from app.test_statements group by target order by target`;
      expect(counted).toEqual([
        { target: "claims", n: 1 },
        { target: "receipts", n: 1 },
      ]);
      const [mails] = await harness.sql<{ n: number }[]>`
        select count(*)::int as n from app.outbox
        where kind = 'receipt_mail' and claim_id = any(${claims.map((c) => c.id)})`;
      expect(mails?.n).toBe(3);
    } finally {
      await harness.sql.unsafe(`
        drop trigger count_claim_statements on app.claims;
        drop trigger count_receipt_statements on app.receipts;
        drop function app.count_statement();
        drop table app.test_statements;`);
    }
  });

  it("completes the others when one claim of the round cannot be completed", async () => {
    const claims = await createPaidClaims(harness.sql, 4);
    const stuck = claims[1] as PaidClaim;
    const others = claims.filter((claim) => claim !== stuck);
    // The receipt of one claim cannot be stored (a stand-in for any fault of one claim's
    // completion): the round's statement for all four fails with it.
    await harness.sql.unsafe(`
      create function app.refuse_one_receipt() returns trigger language plpgsql as $$
      begin
        if new.claim_id = '${stuck.id}' then raise exception 'receipt refused for the test'; end if;
        return new;
      end $$;
      create trigger refuse_one_receipt before insert on app.receipts
        for each row execute function app.refuse_one_receipt();`);
    try {
      await harness.sender.tick();
      await harness.confirmer.tick();

      const statuses = await claimStatuses(
        harness.sql,
        claims.map((claim) => claim.id),
      );
      for (const claim of others) expect(statuses.get(claim.id)).toBe("completed");
      expect(statuses.get(stuck.id)).toBe("paying");
      const payouts = await payoutStatuses(claims);
      for (const claim of others) expect(payouts.get(claim.id)).toBe("confirmed");
      expect(payouts.get(stuck.id)).toBe("broadcast");
      const receipts = await harness.sql<{ claim_id: string }[]>`
        select claim_id from app.receipts where claim_id = any(${claims.map((c) => c.id)})`;
      expect(receipts.map((row) => row.claim_id).sort()).toEqual(
        others.map((claim) => claim.id).sort(),
      );
    } finally {
      await harness.sql.unsafe(`
        drop trigger refuse_one_receipt on app.receipts;
        drop function app.refuse_one_receipt();`);
    }

    // The fault gone, the next round completes it, with its one payout.
    await harness.confirmer.tick();
    expect((await claimStatuses(harness.sql, [stuck.id])).get(stuck.id)).toBe("completed");
    expect((await payoutStatuses([stuck])).get(stuck.id)).toBe("confirmed");
    const [count] = await harness.sql<{ n: number }[]>`
      select count(*)::int as n from app.payouts where claim_id = ${stuck.id}`;
    expect(count?.n).toBe(1);
  });
});
