import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Stack } from "./stack.ts";
import { atomic } from "./usdc.ts";

export interface ClaimSpec {
  agentName?: string;
  email?: string;
}

export interface CompletedClaim extends ClaimSpec {
  claimId: string;
  /** Checksummed; a fresh address per claim, so every payout address is unique. */
  payoutAddress: Address;
  amountDueUsdc: string;
  paymentTx: Hex;
  payoutTx: Hex;
  completedAt: string;
}

/** Creates a claim through POST /api/claims; returns its id and the exact amount it asks. */
export async function createClaim(stack: Stack, spec: ClaimSpec = {}) {
  const payoutAddress = privateKeyToAccount(generatePrivateKey()).address;
  const body = await stack.createClaim(payoutAddress, {
    ...(spec.agentName !== undefined ? { agent_name: spec.agentName } : {}),
    ...(spec.email !== undefined ? { email: spec.email } : {}),
  });
  return { ...spec, claimId: body.claim_id, payoutAddress, amountDueUsdc: body.amount_due_usdc };
}

/**
 * Claims completed end to end, as a client would (variant A, the default): create each claim,
 * pay its exact amount_due from the devnet users (one transfer per user at a time, so nonces
 * never race), mine the confirmations and wait until every claim is `completed`.
 */
export async function completeClaims(stack: Stack, specs: ClaimSpec[]): Promise<CompletedClaim[]> {
  const claims = await Promise.all(specs.map((spec) => createClaim(stack, spec)));
  const payers = stack.chain.users;
  const paymentTxs: Hex[] = [];
  for (let start = 0; start < claims.length; start += payers.length) {
    const batch = claims.slice(start, start + payers.length);
    paymentTxs.push(
      ...(await Promise.all(
        batch.map((claim, index) =>
          stack.chain.transferUsdc(
            payers[index] as (typeof payers)[number],
            stack.chain.payTo.address,
            atomic(claim.amountDueUsdc),
          ),
        ),
      )),
    );
  }
  await stack.mine(2);
  const done = await Promise.all(
    claims.map((claim) => stack.untilClaimStatus(claim.claimId, "completed")),
  );
  return claims.map((claim, index) => {
    const status = done[index] as { payout_tx: Hex; completed_at: string };
    return {
      ...claim,
      paymentTx: paymentTxs[index] as Hex,
      payoutTx: status.payout_tx,
      completedAt: status.completed_at,
    };
  });
}
