import { randomBytes } from "node:crypto";
import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseReceiptMessage } from "../../api/receipts/receiptMessage.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import {
  callDevnetToken,
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

/** Payout rows by claim, with the block as text. */
async function payoutRowsOf(ids: string[]) {
  const rows = await harness.sql<
    { claim_id: string; status: string; tx_hash: string; block_number: string | null }[]
  >`select claim_id, status, tx_hash, block_number::text from app.payouts where claim_id = any(${ids})`;
  return new Map(rows.map((row) => [row.claim_id, row]));
}

describe("completing a round of mined payouts", () => {
  it("completes the whole round in one statement per table, not one per claim", async () => {
    const claims = await createPaidClaims(harness.sql, 5, {
      email: (index) => (index % 2 === 0 ? `holder${index}@example.com` : null),
    });
    await harness.sender.tick();
    await harness.untilAcceptedMined();
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
      await harness.untilAcceptedMined();
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

  it("completes, fails and holds back each claim as its own, receipts naming their own facts", async () => {
    const blockedAddress = getAddress(`0x${randomBytes(20).toString("hex")}`);
    await callDevnetToken(chain, { functionName: "blacklist", args: [blockedAddress] });
    const claims = await createPaidClaims(harness.sql, 5, {
      payoutAddresses: [blockedAddress],
      email: (i) => (i === 2 ? "x@example.com" : null),
    });
    const [blocked, noPayment, ...fine] = claims;
    if (!blocked || !noPayment) throw new Error("fixtures");
    await harness.sender.tick();
    await harness.untilAcceptedMined();
    // The invariant broken on purpose: a paying claim without its payment.
    await harness.sql`delete from app.payments where claim_id = ${noPayment.id}`;
    await harness.confirmer.tick();

    const statuses = await claimStatuses(
      harness.sql,
      claims.map((c) => c.id),
    );
    const rows = await payoutRowsOf(claims.map((c) => c.id));
    expect(statuses.get(blocked.id)).toBe("failed");
    expect(rows.get(blocked.id)?.status).toBe("reverted");
    expect(statuses.get(noPayment.id)).toBe("paying");
    expect(rows.get(noPayment.id)?.status).toBe("broadcast");
    for (const claim of fine) {
      expect(statuses.get(claim.id)).toBe("completed");
      const payout = rows.get(claim.id);
      expect(payout?.status).toBe("confirmed");
      const onChain = await chain.publicClient.getTransactionReceipt({
        hash: payout?.tx_hash as `0x${string}`,
      });
      expect(String(onChain.blockNumber)).toBe(payout?.block_number);
      const [receipt] = await harness.sql<{ message: string }[]>`
        select message from app.receipts where claim_id = ${claim.id}`;
      const facts = parseReceiptMessage(receipt?.message ?? "");
      expect(facts?.Claim).toBe(claim.id);
      expect(facts?.Holder).toBe(claim.payoutAddress);
      expect(facts?.["Payment tx"]).toBe(claim.paymentTx);
      expect(facts?.["Payout tx"]).toBe(payout?.tx_hash);
      expect(facts?.["Payout block"]).toBe(payout?.block_number);
    }
    const [none] = await harness.sql<{ n: number }[]>`
      select count(*)::int as n from app.receipts where claim_id = any(${[blocked.id, noPayment.id]})`;
    expect(none?.n).toBe(0);

    // A payout a reorg took and the chain mined again (simulated: back to broadcast).
    const again = fine[0];
    if (!again) throw new Error("fixtures");
    const [before] = await harness.sql<{ message: string }[]>`
      select message from app.receipts where claim_id = ${again.id}`;
    await harness.sql`
      update app.payouts set status = 'broadcast', block_number = null, block_hash = null,
        confirmed_at = null where claim_id = ${again.id} and status = 'confirmed'`;
    await harness.confirmer.tick();
    expect((await payoutRowsOf([again.id])).get(again.id)?.status).toBe("confirmed");
    expect((await claimStatuses(harness.sql, [again.id])).get(again.id)).toBe("completed");
    const after = await harness.sql<{ message: string }[]>`
      select message from app.receipts where claim_id = ${again.id}`;
    expect(after.map((r) => r.message)).toEqual([before?.message]);
    // The claim without a payment is still held back, round after round.
    expect((await claimStatuses(harness.sql, [noPayment.id])).get(noPayment.id)).toBe("paying");
    expect((await payoutRowsOf([noPayment.id])).get(noPayment.id)?.status).toBe("broadcast");
  });
});
