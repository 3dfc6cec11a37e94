import type { Address, Hex, PrivateKeyAccount } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Database } from "../db/connect.ts";
import { markPaying } from "../lifecycle/markPaying.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import type { PayoutFees } from "./payoutFees.ts";
import { insertSignedPayouts } from "./payoutRecords.ts";
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
 * A claim already `paying` gets a new payout only when its last one can never be mined: it
 * reverted for a reason that passes, or an operator found its nonce taken, and that is final
 * (PAYOUT_CONFIRMATIONS deep). The database allows one live payout per claim.
 *
 * The next nonce is the higher of the database's (every nonce ever signed or filled,
 * unbroadcast ones included) and the chain's pending count (in case the wallet sent something
 * else). Two signers racing (should the advisory lock ever fail) collide on `payouts.nonce` and
 * one rolls back.
 */
export async function signNewPayouts(
  sql: Database,
  account: PrivateKeyAccount,
  config: ServiceConfig,
  plan: { limit: number; pendingNonce: bigint; fees: PayoutFees },
): Promise<PayoutTx[]> {
  if (plan.limit <= 0) return [];
  return sql.begin(async (transaction) => {
    const claims = await transaction<{ id: string; payout_address: string; status: string }[]>`
      select c.id, c.payout_address, c.status
      from app.claims c
      where c.status in ('paid', 'paying')
        and exists (select 1 from app.payments p where p.claim_id = c.id)
        and not exists (
          select 1 from app.payouts o
          where o.claim_id = c.id
            and (o.status in ('signed', 'broadcast', 'confirmed') or o.final_at is null))
      order by c.paid_at, c.id
      limit ${plan.limit}
      for update of c skip locked`;
    if (claims.length === 0) return [];

    const [row] = await transaction<{ next: bigint }[]>`
      select greatest(
        (select coalesce(max(nonce) + 1, 0) from app.payouts),
        (select coalesce(max(nonce) + 1, 0) from app.nonce_fillers))::int8 as next`;
    const databaseNext = row?.next ?? 0n;
    let nonce = databaseNext > plan.pendingNonce ? databaseNext : plan.pendingNonce;

    const payouts: (PayoutTx & { to: Address })[] = [];
    for (const claim of claims) {
      const to = checksummed(claim.payout_address);
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

    await insertSignedPayouts(transaction, payouts, plan.fees);
    const paid = new Set(
      claims.filter((claim) => claim.status === "paid").map((claim) => claim.id),
    );
    await markPaying(
      transaction,
      payouts.filter((payout) => paid.has(payout.claimId)).map((payout) => payout.claimId),
    );
    return payouts.map(({ to: _to, ...payout }) => payout);
  });
}
