import type { Address, Hex, PrivateKeyAccount } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Database, Sql } from "../db/connect.ts";
import { markPaying } from "../lifecycle/markPaying.ts";
import { PAYOUT_ATOMIC } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import {
  SETTLE_MARGIN_SECONDS,
  type SignedAuthorization,
  signedAuthorizationOf,
} from "../x402/paymentAuthorization.ts";
import type { PayoutFees } from "./payoutFees.ts";
import { insertSignedPayouts } from "./payoutRecords.ts";
import { signPayoutTransaction, signSettleAndPayTransaction } from "./signPayoutTransaction.ts";

/** A stored payout transaction, ready to go to the node. */
export interface PayoutTx {
  claimId: string;
  nonce: bigint;
  txHash: Hex;
  rawTx: Hex;
  /** A settle-and-pay payout (docs/payments.md#one-transaction-settlement); set when just signed. */
  settlesX402?: boolean;
}

/**
 * paid → paying for up to `limit` claims, oldest payment first, in ONE transaction (with, first,
 * the x402 authorizations waiting to be settled by their payout: authorizationsToSettle): take
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
  plan: {
    limit: number;
    pendingNonce: bigint;
    fees: PayoutFees;
    /** How many settle-and-pay payouts the wallet's allowance to SettleAndPay covers. */
    settleAndPayCovered?: number;
    /**
     * Whether this process would record a payment to settle with its payout now (the local
     * facilitator, SettleAndPay's code verified: x402/settleAndPayCode.ts): only then does a
     * claim whose settle-and-pay an operator abandoned get a new one (authorizationsToSettle).
     */
    settleAgain?: boolean;
  },
): Promise<PayoutTx[]> {
  if (plan.limit <= 0) return [];
  return sql.begin(async (transaction) => {
    const settling = await authorizationsToSettle(
      transaction,
      config,
      Math.min(plan.limit, plan.settleAndPayCovered ?? 0),
      plan.settleAgain ?? false,
    );
    const claims = await transaction<{ id: string; payout_address: string; status: string }[]>`
      select c.id, c.payout_address, c.status
      from app.claims c
      where c.status in ('paid', 'paying')
        and exists (select 1 from app.payments p where p.claim_id = c.id)
        and not exists (
          select 1 from app.payouts o
          where o.claim_id = c.id
            and (o.status in ('signed', 'broadcast', 'confirmed') or o.final_at is null))
        -- A claim that had a settle-and-pay payout is paid out again only on a payment of
        -- its own, never on the one that payout carried: a reorg that mines the combined
        -- transaction again as reverted (the payer spent the nonce first) takes that payment
        -- with it, whether or not the settlement watcher has said "lost" yet.
        and (
          not exists (select 1 from app.payouts s where s.claim_id = c.id and s.settles_x402)
          or exists (
            select 1 from app.payments p
            where p.claim_id = c.id
              and not exists (
                select 1 from app.payout_attempts a
                where a.claim_id = c.id and a.tx_hash = p.tx_hash)))
      order by c.paid_at, c.id
      limit ${plan.limit - settling.length}
      for update of c skip locked`;
    if (claims.length === 0 && settling.length === 0) return [];

    const [row] = await transaction<{ next: bigint }[]>`
      select greatest(
        (select coalesce(max(nonce) + 1, 0) from app.payouts),
        (select coalesce(max(nonce) + 1, 0) from app.nonce_fillers))::int8 as next`;
    const databaseNext = row?.next ?? 0n;
    let nonce = databaseNext > plan.pendingNonce ? databaseNext : plan.pendingNonce;

    const payouts: (PayoutTx & { to: Address; settlesX402: boolean })[] = [];
    // Requests wait on these: they take the lowest nonces of the round.
    for (const entry of settling) {
      const to = checksummed(entry.payoutAddress);
      const signed = await signSettleAndPayTransaction(
        account,
        {
          chainId: config.chain.chainId,
          usdc: config.chain.usdcAddress,
          contract: entry.contract,
          nonce,
          gas: entry.gas,
          recipient: to,
          amount: PAYOUT_ATOMIC,
          authorization: entry.authorization,
        },
        plan.fees,
      );
      payouts.push({ claimId: entry.claimId, nonce, to, settlesX402: true, ...signed });
      nonce += 1n;
    }
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
      payouts.push({ claimId: claim.id, nonce, to, settlesX402: false, ...signed });
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

interface AuthorizationToSettle {
  claimId: string;
  payoutAddress: string;
  contract: Address;
  gas: bigint;
  authorization: SignedAuthorization;
}

/**
 * x402 authorizations waiting to be settled with their payout (docs/payments.md#one-transaction-settlement),
 * oldest first, their claims locked: a claim still awaiting payment, with no payout at all yet
 * (one settle-and-pay per authorization: after a revert the chain decides, never a second try),
 * or only one an operator abandoned because a foreign transaction took its nonce while the
 * authorization stayed unused (reissueSettleAndPay.ts): that one can never be mined, and should
 * a reorg bring it back, the token lets the authorization be used once, by one of the two.
 * A payment recorded to settle with its payout was decided so once, with SettleAndPay's code
 * seen at its address, and its first settle-and-pay trusts that record; a second one is signed
 * only while this process decides the same now (`settleAgain`): the operator's command checked
 * with its own settings, which may not be the service's, and the address may have changed since.
 * Without it the claim waits, and fails once its authorization ran out unused (watchSettlements.ts).
 * `unknown` too: the request stopped waiting (its timeout, or its process died and the stale
 * sweep marked it), yet nothing but this sender ever settles such an authorization, so it is
 * still signed while the authorization is valid, and the claim completes without the request.
 */
async function authorizationsToSettle(
  transaction: Sql,
  config: ServiceConfig,
  limit: number,
  settleAgain: boolean,
): Promise<AuthorizationToSettle[]> {
  const settleAndPay = config.x402.settleAndPay;
  if (!settleAndPay || limit <= 0) return [];
  const rows = await transaction<
    { claim_id: string; payout_address: string; payment_header: string | null }[]
  >`
    select c.id as claim_id, c.payout_address, x.payment_header
    from app.x402_payments x join app.claims c on c.id = x.claim_id
    where x.status in ('settling', 'unknown') and x.settle_with_payout
      and c.status = 'awaiting_payment'
      and not exists (
        select 1 from app.payouts o
        where o.claim_id = c.id and (o.status <> 'abandoned' or not ${settleAgain}))
    order by x.updated_at
    limit ${limit}
    for update of c skip locked`;
  const now = BigInt(Math.floor(Date.now() / 1000));
  const due: AuthorizationToSettle[] = [];
  for (const row of rows) {
    const authorization = row.payment_header ? signedAuthorizationOf(row.payment_header) : null;
    // Left as it is: the settlement watcher fails it once it ran out unused.
    if (!authorization || authorization.validBefore <= now + SETTLE_MARGIN_SECONDS) continue;
    due.push({
      claimId: row.claim_id,
      payoutAddress: row.payout_address,
      contract: settleAndPay.address,
      gas: settleAndPay.gasLimit,
      authorization,
    });
  }
  return due;
}
