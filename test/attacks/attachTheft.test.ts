import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { payoutsWithoutPayment } from "../support/moneyInvariant.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";

/**
 * Variant B: a transfer's hash is public the moment it is mined, so naming it must not be a
 * way to take somebody else's payout. A transfer from an open claim's payout address belongs
 * to that claim; a transfer from another wallet is attached with the sender's signature, and a
 * signed attach wins over an unsigned one while the transfer is unpaid.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "B" } });
});

// Whatever a scenario asserts, no payout without 10 USDC at depth for it (test/attacks/README.md).
afterEach(async () => {
  if (!stack) return;
  const confirmations = Number(stack.service.config.chain.confirmations);
  expect(await payoutsWithoutPayment(stack.chain, stack.service.sql, confirmations)).toEqual([]);
});

afterAll(async () => {
  await stack?.stop();
});

const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

function createClaim(body: Record<string, unknown>) {
  return stack.api<Record<string, unknown> & { claim_id: string; status: string }>("/api/claims", {
    body,
  });
}

function attach(claimId: string, body: Record<string, unknown>) {
  return stack.api<Record<string, unknown>>(`/api/claims/${claimId}/tx`, { body });
}

/** Sends 10 USDC from `payer` without mining confirmations: inside the window a bot can act. */
function pay(payerIndex: number): Promise<Hex> {
  return stack.chain.transferUsdc(
    stack.chain.user(payerIndex),
    stack.chain.payTo.address,
    10n * USDC,
  );
}

function sign(signerIndex: number, claimId: string): Promise<Hex> {
  return stack.chain.walletFor(stack.chain.user(signerIndex)).signMessage({ message: claimId });
}

describe("variant B: naming a transaction hash", () => {
  it("gives a transfer from an open claim's payout address to that claim, never to a claim that names its hash", async () => {
    const victim = stack.chain.user(0);
    const victimClaim = await createClaim({ payout_address: victim.address });
    expect(victimClaim.status).toBe(201);
    const hash = await pay(0);

    // A bot watching pay_to names the fresh hash on a claim of its own, before confirmations.
    const bot = freshAddress();
    const stolen = await createClaim({ payout_address: bot, tx_hash: hash });
    expect(stolen.status).toBe(422);
    expect(stolen.body).toMatchObject({
      type: "/problems/tx_not_qualifying",
      reason: "sender_has_open_claim",
    });
    const botClaim = await createClaim({ payout_address: bot });
    const named = await attach(botClaim.body.claim_id, { tx_hash: hash });
    expect(named.status).toBe(422);

    await stack.mine(2);
    await stack.untilClaimStatus(victimClaim.body.claim_id, "completed");
    expect(await payoutTransfersTo(stack.chain, victim.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, bot)).toHaveLength(0);
  });

  it("lets the sender's signature over the claim id take a transfer from another wallet away from an unsigned naming", async () => {
    // The paying wallet (an exchange, a friend) has no claim; the holder's claim names the
    // transfer with the sender's EIP-191 signature over its claim id.
    const holder = freshAddress();
    const holderClaim = await createClaim({ payout_address: holder });
    const hash = await pay(1);

    const bot = freshAddress();
    const botClaim = await createClaim({ payout_address: bot, tx_hash: hash });
    expect(botClaim.status).toBe(201);

    const forged = await attach(holderClaim.body.claim_id, {
      tx_hash: hash,
      signature: await sign(2, holderClaim.body.claim_id),
    });
    expect(forged.status).toBe(422);
    expect(forged.body).toMatchObject({ reason: "signature_not_from_sender" });

    const signed = await attach(holderClaim.body.claim_id, {
      tx_hash: hash,
      signature: await sign(1, holderClaim.body.claim_id),
    });
    expect(signed.status).toBe(200);
    expect(signed.body).toMatchObject({ attached_tx: { tx_hash: hash, signed: true } });
    const botNow = await stack.api(`/api/claims/${botClaim.body.claim_id}`);
    expect(botNow.body.tx_hash).toBeNull();

    // Once signed, an unsigned naming cannot take it back.
    const retake = await attach(botClaim.body.claim_id, { tx_hash: hash });
    expect(retake.status).toBe(409);
    expect(retake.body.type).toBe("/problems/tx_already_used");

    await stack.mine(2);
    await stack.untilClaimStatus(holderClaim.body.claim_id, "completed");
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, bot as Address)).toHaveLength(0);
  });

  it("states the remaining risk of unsigned attaches in its terms", async () => {
    const offer = await stack.api<{ terms: string[]; how_it_works: string[] }>("/api/info");
    expect(offer.body.terms.join("\n")).toMatch(/without the sender's signature/i);
    expect(offer.body.how_it_works.join("\n")).toMatch(/sign/i);
  });
});
