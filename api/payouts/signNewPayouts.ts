import { type Address, getAddress, type Hex, type PrivateKeyAccount } from "viem";
import type { ServiceConfig } from "../config.ts";
import type { Database } from "../db/connect.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import type { PayoutFees } from "./payoutFees.ts";
import { signPayoutTransaction } from "./signPayoutTransaction.ts";

/** A stored payout transaction, ready to go to the node. */
export interface PayoutTx {
  claimId: string;
  nonce: bigint;
  txHash: Hex;
  rawTx: Hex;
}

/**
 * paid → paying for up to `limit` claims, oldest payment first, in ONE transaction: take
 * consecutive nonces, sign each transfer locally, store payout + first attempt, mark the
 * claim. Nothing is broadcast here: a transaction exists outside this process only once its
 * bytes are committed, so a crash can never leave a sent payout the database does not know.
 *
 * The next nonce is the higher of the database's (every nonce ever signed, unbroadcast ones
 * included) and the chain's pending count (in case the wallet sent something else). Two
 * signers racing (should the advisory lock ever fail) collide on `payouts.nonce` UNIQUE and one
 * rolls back; `payouts.claim_id` as primary key makes a second payout for a claim impossible.
 */
export async function signNewPayouts(
  sql: Database,
  account: PrivateKeyAccount,
  config: ServiceConfig,
  plan: { limit: number; pendingNonce: bigint; fees: PayoutFees },
): Promise<PayoutTx[]> {
  if (plan.limit <= 0) return [];
  return sql.begin(async (transaction) => {
    const claims = await transaction<{ id: string; payout_address: string }[]>`
      select c.id, c.payout_address
      from app.claims c
      where c.status = 'paid'
        and exists (select 1 from app.payments p where p.claim_id = c.id)
        and not exists (select 1 from app.payouts o where o.claim_id = c.id)
      order by c.paid_at, c.id
      limit ${plan.limit}
      for update of c skip locked`;
    if (claims.length === 0) return [];

    const [row] = await transaction<{ next: bigint }[]>`
      select coalesce(max(nonce) + 1, 0)::int8 as next from app.payouts`;
    const databaseNext = row?.next ?? 0n;
    let nonce = databaseNext > plan.pendingNonce ? databaseNext : plan.pendingNonce;

    const payouts: (PayoutTx & { to: Address })[] = [];
    for (const claim of claims) {
      const to = getAddress(claim.payout_address);
      const signed = await signPayoutTransaction(
        account,
        {
          chainId: config.chain.chainId,
          usdc: config.chain.usdcAddress,
          nonce,
          gas: config.payouts.gasLimit,
          recipient: to,
          amount: PAYOUT_ATOMIC,
        },
        plan.fees,
      );
      payouts.push({ claimId: claim.id, nonce, to, ...signed });
      nonce += 1n;
    }

    await transaction`
      insert into app.payouts ${transaction(
        payouts.map((payout) => ({
          claim_id: payout.claimId,
          to_address: payout.to.toLowerCase(),
          amount: PAYOUT_ATOMIC.toString(),
          nonce: payout.nonce,
          tx_hash: payout.txHash,
          raw_tx: payout.rawTx,
        })),
      )}`;
    await transaction`
      insert into app.payout_attempts ${transaction(
        payouts.map((payout) => ({
          tx_hash: payout.txHash,
          claim_id: payout.claimId,
          nonce: payout.nonce,
          raw_tx: payout.rawTx,
          max_fee_per_gas: plan.fees.maxFeePerGas.toString(),
          max_priority_fee_per_gas: plan.fees.maxPriorityFeePerGas.toString(),
        })),
      )}`;
    const marked = await transaction`
      update app.claims set status = 'paying'
      where id = any(${transaction.array(payouts.map((payout) => payout.claimId))}::text[])
        and status = 'paid'`;
    if (marked.count !== payouts.length) {
      throw new Error(`Marked ${marked.count} of ${payouts.length} claims paying; rolling back`);
    }
    return payouts.map(({ to: _to, ...payout }) => payout);
  });
}
