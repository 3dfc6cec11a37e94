import { readIndexedBlock } from "../../api/chain/indexedBlock.ts";
import type { Sql } from "../../api/db/connect.ts";
import { hasSqlState, SQL_STATE } from "../../api/db/sqlState.ts";
import type { Attention, AttentionDepth } from "../../api/health/readAttention.ts";

/**
 * The attention counts' reference for the tests: api/health/readAttention.ts as it read every row
 * before the attention check's marks (docs/operating.md#attention-checked-through), kept as it
 * was, so that the marked read is compared with queries it does not share.
 *
 * Payouts whose nonce a foreign transaction took, x402 settlements lost for good, and what the
 * indexer's view of the chain shows against our records: USDC the payout wallet sent that is
 * none of our payouts, payouts whose payment a reorg took away, and claims paid out twice.
 */
export async function readAttentionAsFirstRead(
  sql: Sql,
  depth: AttentionDepth,
): Promise<Attention> {
  const [row] = await sql<{ nonce_taken: number; lost: number }[]>`
    select
      (select count(*)::int from app.payouts
        where nonce_taken_at is not null and status in ('signed', 'broadcast')) as nonce_taken,
      (select count(*)::int from app.x402_payments where status = 'lost') as lost`;
  const [foreign, unpaid, twice, missing] = await Promise.all([
    readIndexed(
      sql<{ n: number }[]>`
        select count(*)::int as n from chain.outgoing_transfer o
        where not exists (select 1 from app.payout_attempts a where a.tx_hash = o.tx_hash)`,
    ),
    readPayoutsWithoutPayment(sql, depth),
    readClaimsPaidTwice(sql),
    readFinalPayoutsMissing(sql),
  ]);
  return {
    payout_nonce_taken: row?.nonce_taken ?? 0,
    payout_wallet_foreign_transfer: foreign,
    x402_settlement_lost: row?.lost ?? 0,
    payout_without_payment: unpaid,
    claim_paid_twice: twice,
    payout_missing_on_chain: missing,
  };
}

/**
 * Claims holding a payout that moved or may move USDC (signed, broadcast or confirmed) whose
 * recorded payment should be at depth by now (its block is), yet the indexer holds no transfer
 * of that identity (transaction, sender, value: what a reorg that mines it again elsewhere
 * keeps) at depth: a reorg deeper than CONFIRMATIONS took the payment away after the payout was
 * signed (docs/operating.md#matcher-reorgs). An x402 payment is recorded at one block, before
 * it is deep: it counts only once its block is.
 */
async function readPayoutsWithoutPayment(sql: Sql, depth: AttentionDepth): Promise<number> {
  const indexed = await readIndexedBlock(sql, depth.chainId);
  if (indexed === null) return 0;
  const deepThrough = String(indexed - BigInt(depth.confirmations));
  // An x402 settlement a reorg dropped and the service settled again, or mined again elsewhere,
  // keeps its first transaction here until the settlement watcher follows the new one at depth
  // (watchSettlements.ts): until then it counts only once lost. Its transfer is found by the
  // authorization it carries (payer and nonce), whatever transaction carries it now.
  return readIndexed(sql<{ n: number }[]>`
    select count(distinct p.claim_id)::int as n
    from app.payouts p join app.payments m on m.claim_id = p.claim_id
    left join app.x402_payments x on x.claim_id = m.claim_id
    where p.status in ('signed', 'broadcast', 'confirmed')
      and m.block_number <= ${deepThrough}
      and (m.matched_by <> 'x402' or m.verified_at is not null or x.status = 'lost')
      and not exists (
        select 1 from chain.incoming_transfer t
        where t."from" = m.from_address and t.value = m.value
          and t.block_number <= ${deepThrough}
          and (t.tx_hash = m.tx_hash
            or (m.authorization_nonce is not null
              and t.authorization_nonce = m.authorization_nonce)))`);
}

/**
 * Claims with more than one successful payout transfer on the chain, from the indexer's
 * outgoing transfers of the payout wallet (each matched to a claim by the attempt that is its
 * transaction). Read from the indexer, not from `app.payouts`: the table holds what the
 * service believes of each nonce, and a payout it abandoned or replaced is watched no more, so
 * its bytes mined late by a reorg (docs/operating.md#payout-reorgs) show only in the chain's
 * logs, which the indexer follows through reorgs.
 */
function readClaimsPaidTwice(sql: Sql): Promise<number> {
  return readIndexed(sql<{ n: number }[]>`
    select count(*)::int as n from (
      select a.claim_id from chain.outgoing_transfer o
      join app.payout_attempts a on a.tx_hash = o.tx_hash
      group by a.claim_id
      having count(distinct o.tx_hash) > 1) twice`);
}

/**
 * Final successful payouts none of whose attempts the indexer holds as a transfer from the
 * payout wallet: a reorg deeper than PAYOUT_CONFIRMATIONS mined the payout again as reverted
 * (its USDC drained first), or took it away and another transaction took its nonce. Past the
 * depth nothing is undone by itself, and neither the watch (final payouts) nor the revive (a
 * nonce the chain has passed) looks at it again: the claim shows completed and the payer was
 * not paid (docs/operating.md#payout-reorgs). The mirror of payout_without_payment. A payout
 * is final only once the indexer held its transfer, so a missing one is the chain's change.
 */
function readFinalPayoutsMissing(sql: Sql): Promise<number> {
  return readIndexed(sql<{ n: number }[]>`
    select count(*)::int as n from app.payouts p
    where p.status = 'confirmed' and p.final_at is not null
      and not exists (
        select 1 from app.payout_attempts a
        join chain.outgoing_transfer o on o.tx_hash = a.tx_hash
        where a.nonce = p.nonce)`);
}

/** A count over the indexer's views; 0 before the indexer has made them. */
async function readIndexed(query: Promise<{ n: number }[]>): Promise<number> {
  const rows = await query.catch((error: unknown) => {
    if (hasSqlState(error, SQL_STATE.undefinedTable)) return [{ n: 0 }];
    throw error;
  });
  return rows[0]?.n ?? 0;
}
