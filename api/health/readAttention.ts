import type { Sql } from "../db/connect.ts";
import { hasSqlState, SQL_STATE } from "../db/sqlState.ts";
import type { ATTENTION_REASONS } from "../reasons/reasonCatalog.ts";

/** How many things of each kind wait for a person. */
export type Attention = Record<(typeof ATTENTION_REASONS)[number], number>;

/**
 * Payouts whose nonce a foreign transaction took, USDC the payout wallet sent that is none of
 * our payouts (the indexer's outgoing transfers against our attempts), and x402 settlements
 * lost for good.
 */
export async function readAttention(sql: Sql): Promise<Attention> {
  const [row] = await sql<{ nonce_taken: number; lost: number }[]>`
    select
      (select count(*)::int from app.payouts
        where nonce_taken_at is not null and status in ('signed', 'broadcast')) as nonce_taken,
      (select count(*)::int from app.x402_payments where status = 'lost') as lost`;
  const foreign = await sql<{ n: number }[]>`
    select count(*)::int as n from chain.outgoing_transfer o
    where not exists (select 1 from app.payout_attempts a where a.tx_hash = o.tx_hash)`.catch(
    (error: unknown) => {
      if (hasSqlState(error, SQL_STATE.undefinedTable)) return [{ n: 0 }];
      throw error;
    },
  );
  return {
    payout_nonce_taken: row?.nonce_taken ?? 0,
    payout_wallet_foreign_transfer: foreign[0]?.n ?? 0,
    x402_settlement_lost: row?.lost ?? 0,
  };
}
