import { getAddress, type Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payoutTransfersTo } from "../support/payouts.ts";
import { parsePrometheusText, sampleValue } from "../support/prometheusText.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * Claim creation under abuse (variant A): a flood from many networks against a small amount
 * space still opens claims (without unique amounts, paid by sender or named hash); one client
 * holds at most OPEN_CLAIMS_PER_CLIENT open claims, counted by IPv6 /48; the same payout
 * address asking again gets its open claim back; released reservations are swept.
 */

const SPACE = 4;
const CAP = 3;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    serviceEnv: {
      MATCHING_VARIANT: "A",
      AMOUNT_SPACE_SIZE: String(SPACE),
      OPEN_CLAIMS_PER_CLIENT: String(CAP),
      TRUST_PROXY: "loopback",
      EXPIRY_INTERVAL_MS: "100",
    },
  });
});

afterAll(async () => {
  await stack?.stop();
});

type ClaimAnswer = Record<string, unknown> & {
  claim_id: string;
  amount_due_usdc: string;
  payment_instructions: { unique_amount: boolean; amount_usdc: string; ways: string[] };
};

let nextNetwork = 1;
/** An address in a /48 of its own (and so a /64 of its own): a new client each time. */
function freshClient(): string {
  const network = (nextNetwork++).toString(16);
  return `2001:db8:${network}::1`;
}

/** A payout address nobody else uses in this file. */
function freshPayoutAddress(): Hex {
  return getAddress(`0x${(0xabc00000 + nextNetwork++).toString(16).padStart(40, "0")}`);
}

function postClaim(client: string, body: Record<string, unknown>) {
  return stack.api<ClaimAnswer & { type?: string; limit?: number }>("/api/claims", {
    body,
    headers: { "x-forwarded-for": client },
  });
}

describe("a flood of claims against a small amount space", () => {
  const opened: ClaimAnswer[] = [];

  beforeAll(async () => {
    for (let index = 0; index < SPACE + 6; index++) {
      const response = await postClaim(freshClient(), { payout_address: freshPayoutAddress() });
      expect(response.status, JSON.stringify(response.body)).toBe(201);
      opened.push(response.body);
    }
  });

  it("opens every claim; those beyond the space have no unique amount and say how to pay", () => {
    const unique = opened.filter((claim) => claim.payment_instructions.unique_amount);
    const plain = opened.filter((claim) => !claim.payment_instructions.unique_amount);
    expect(unique.length).toBeLessThanOrEqual(SPACE);
    expect(plain.length).toBeGreaterThanOrEqual(6);
    expect(new Set(unique.map((claim) => claim.amount_due_usdc)).size).toBe(unique.length);
    for (const claim of plain) {
      expect(claim.amount_due_usdc).toBe("10.000000");
      expect(claim.payment_instructions.amount_usdc).toBe("10.000000");
      expect(claim.payment_instructions.ways.join(" ")).toMatch(/no unique amount was free/i);
      expect(claim.payment_instructions.ways.join(" ")).toMatch(/payout address/);
    }
  });

  it("says so in health and in the fill-level metric", async () => {
    const health = await waitFor(
      async () => {
        const answer = await stack.api<{ reasons: string[]; amount_space: { held: number } }>(
          "/api/health",
        );
        return answer.body.reasons.includes("amount_space_scarce") ? answer.body : undefined;
      },
      { what: "health to say amount_space_scarce" },
    );
    expect(health.amount_space).toMatchObject({ ok: false, size: SPACE, fill_ratio: 1 });
    const metrics = await fetch(`${stack.service.url}/metrics`);
    const exposition = parsePrometheusText(await metrics.text());
    expect(sampleValue(exposition, "pay_and_earn_amount_space_fill_ratio")).toBe(1);
  });

  it("pays a claim without a unique amount from its payout address (sender rule)", async () => {
    const holder = stack.chain.user(0);
    const response = await postClaim(freshClient(), { payout_address: holder.address });
    expect(response.body.payment_instructions.unique_amount).toBe(false);

    await stack.chain.transferUsdc(holder, stack.chain.payTo.address, 10n * USDC);
    await stack.mine(2);

    const completed = await stack.untilClaimStatus(response.body.claim_id, "completed");
    expect(completed.payment).toMatchObject({ matched_by: "sender", amount_usdc: "10.000000" });
  });

  it("pays one from another wallet by its named tx hash, and the price alone pays nobody", async () => {
    const payoutAddress = freshPayoutAddress();
    const response = await postClaim(freshClient(), { payout_address: payoutAddress });
    expect(response.body.payment_instructions.unique_amount).toBe(false);

    // 10 USDC from a wallet that names no claim: the price alone tells no claim apart.
    const stray = await stack.chain.transferUsdc(
      stack.chain.user(1),
      stack.chain.payTo.address,
      10n * USDC,
    );
    const named = await stack.chain.transferUsdc(
      stack.chain.user(2),
      stack.chain.payTo.address,
      10n * USDC,
    );
    const attached = await stack.api(`/api/claims/${response.body.claim_id}/tx`, {
      body: { tx_hash: named },
    });
    expect(attached.status, JSON.stringify(attached.body)).toBeLessThan(300);
    await stack.mine(2);

    const completed = await stack.untilClaimStatus(response.body.claim_id, "completed");
    expect(completed.payment).toMatchObject({ matched_by: "tx_hash", tx_hash: named });
    const strayState = await stack.untilTransferState(stray, "unmatched");
    expect(strayState).toMatchObject({ reason: "no_matching_claim" });
    expect(await payoutTransfersTo(stack.chain, payoutAddress)).toHaveLength(1);
  });
});

describe("one client's open claims", () => {
  it("are capped per IPv6 /48, whichever /64 asks, and another /48 is not affected", async () => {
    const site = `2001:db8:ff${(nextNetwork++).toString(16).padStart(2, "0")}`;
    for (let index = 0; index < CAP; index++) {
      const response = await postClaim(`${site}:${index + 1}::7`, {
        payout_address: freshPayoutAddress(),
      });
      expect(response.status, JSON.stringify(response.body)).toBe(201);
    }
    const refused = await postClaim(`${site}:99::7`, { payout_address: freshPayoutAddress() });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(refused.body).toMatchObject({ type: expect.stringMatching(/too_many_open_claims$/) });
    expect(refused.body.limit).toBe(CAP);

    const elsewhere = await postClaim(freshClient(), { payout_address: freshPayoutAddress() });
    expect(elsewhere.status).toBe(201);
  });
});

describe("the same payout address asking again", () => {
  it("gets its open claim back (200), also at the cap, and a new one for other fields", async () => {
    const client = freshClient();
    const payoutAddress = freshPayoutAddress();
    const first = await postClaim(client, { payout_address: payoutAddress, agent_name: "twice" });
    expect(first.status).toBe(201);
    const again = await postClaim(client, {
      payout_address: payoutAddress.toLowerCase(),
      agent_name: "twice",
    });
    expect(again.status).toBe(200);
    expect(again.body.claim_id).toBe(first.body.claim_id);
    expect(again.body.amount_due_usdc).toBe(first.body.amount_due_usdc);

    const renamed = await postClaim(client, { payout_address: payoutAddress, agent_name: "other" });
    expect(renamed.status).toBe(201);
    expect(renamed.body.claim_id).not.toBe(first.body.claim_id);

    // A third claim fills the client's cap; asking again for the first still answers.
    const third = await postClaim(client, { payout_address: freshPayoutAddress() });
    expect(third.status).toBe(201);
    const atCap = await postClaim(client, { payout_address: payoutAddress, agent_name: "twice" });
    expect(atCap.status).toBe(200);
    expect(atCap.body.claim_id).toBe(first.body.claim_id);
  });
});

describe("released reservations", () => {
  it("are swept once past held_until, so the amount is free and counted free", async () => {
    const sql = stack.service.sql;
    const [held] = await sql<{ amount: string; claim_id: string }[]>`
      select amount, claim_id from app.amount_reservations order by amount limit 1`;
    expect(held).toBeDefined();
    await sql`
      update app.amount_reservations set held_until = now() - interval '1 second'
      where amount = ${held?.amount as string}`;
    await waitFor(
      async () => {
        const rows = await sql`
          select 1 from app.amount_reservations where amount = ${held?.amount as string}`;
        return rows.length === 0;
      },
      { what: "the released reservation to be swept" },
    );
  });
});
