import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

/** Unpaid claims expire (lifetime shortened to seconds here); a late payment pays nobody. */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    serviceEnv: {
      MATCHING_VARIANT: "A",
      CLAIM_LIFETIME_SECONDS: "3",
      EXPIRY_GRACE_SECONDS: "0",
      EXPIRY_INTERVAL_MS: "100",
    },
  });
});

afterAll(async () => {
  await stack?.stop();
});

const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

const payer = (index: number) => stack.chain.user(index);

async function createClaim() {
  const holder = freshAddress();
  const created = await stack.createClaim(holder);
  return { holder, ...created, amountDue: atomic(created.amount_due_usdc) };
}

describe("expiry", () => {
  it("expires an unpaid claim and keeps its amount reserved after expiry", async () => {
    const claim = await createClaim();
    const expired = await stack.untilClaimStatus(claim.claim_id, "expired");
    expect(expired.payment_instructions).toBeNull();
    expect(expired.next_step).toMatch(/Create a new claim/);

    const [reservation] = await stack.service.sql<{ held: boolean }[]>`
      select r.held_until > c.expires_at + interval '29 days' as held
      from app.amount_reservations r join app.claims c on c.id = r.claim_id
      where c.id = ${claim.claim_id}`;
    expect(reservation?.held).toBe(true);
  });

  it("pays nobody for a payment that arrives after expiry, and says why", async () => {
    const claim = await createClaim();
    const expired = await stack.untilClaimStatus(claim.claim_id, "expired");
    // Block times have whole seconds; be sure the payment's block is stamped after expiry.
    const expiresAt = new Date(expired.expires_at as string).getTime();
    await waitFor(() => Date.now() > expiresAt + 1_000, { what: "a second past expiry" });

    const hash = await stack.chain.transferUsdc(
      payer(0),
      stack.chain.payTo.address,
      claim.amountDue,
    );
    await stack.mine(2);

    const transfer = await stack.untilTransferState(hash, "unmatched");
    expect(transfer).toMatchObject({
      reason: "claim_expired",
      claim_id: claim.claim_id,
      claim_status: "expired",
    });
    expect((await stack.api(`/api/claims/${claim.claim_id}`)).body.status).toBe("expired");
    expect(await payoutTransfersTo(stack.chain, claim.holder)).toHaveLength(0);

    const attach = await stack.api(`/api/claims/${claim.claim_id}/tx`, { body: { tx_hash: hash } });
    expect(attach.status).toBe(410);
    expect(attach.body.type).toBe("/problems/claim_expired");
  });

  it("pays a claim whose payment was mined in time but confirmed after it showed expired", async () => {
    const claim = await createClaim();
    await stack.chain.transferUsdc(payer(1), stack.chain.payTo.address, claim.amountDue);
    await stack.untilClaimStatus(claim.claim_id, "expired");

    await stack.mine(2);

    const done = await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(done.payment).toMatchObject({ matched_by: "amount" });
    expect(await payoutTransfersTo(stack.chain, claim.holder)).toHaveLength(1);
  });

  it("accepts, after expiry, the hash of a payment mined before it: the block's time decides, not the clock", async () => {
    const claim = await createClaim();
    const hash = await stack.chain.transferUsdc(
      payer(2),
      stack.chain.payTo.address,
      claim.amountDue,
    );
    const expired = await stack.untilClaimStatus(claim.claim_id, "expired");
    const expiresAt = new Date(expired.expires_at as string).getTime();
    await waitFor(() => Date.now() > expiresAt + 1_000, { what: "a second past expiry" });

    const attach = await stack.api(`/api/claims/${claim.claim_id}/tx`, { body: { tx_hash: hash } });
    expect(attach.status).toBe(200);
    expect(attach.body).toMatchObject({ attached_tx: { tx_hash: hash } });

    await stack.mine(2);
    await stack.untilClaimStatus(claim.claim_id, "completed");
    expect(await payoutTransfersTo(stack.chain, claim.holder)).toHaveLength(1);
  });
});
