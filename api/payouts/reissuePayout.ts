import type { Address, Hex, PublicClient } from "viem";
import type { Database } from "../db/connect.ts";
import { WAKE_CHANNELS, wakeWorker } from "../workers/wakeChannels.ts";
import { abandonForReissue } from "./payoutRecords.ts";
import { readReceipts } from "./payoutRpc.ts";
import { reissueSettleAndPay, type SettleAndPayReissue } from "./reissueSettleAndPay.ts";

export type ReissueOutcome =
  | { type: "reissued"; nonce: bigint }
  | SettleAndPayReissue
  | { type: "claim_not_found" }
  | { type: "not_waiting_on_taken_nonce"; detail: string }
  | { type: "already_reissued" }
  | { type: "not_final"; detail: string }
  | { type: "attempt_mined"; txHash: Hex };

/**
 * The operator's way out for a claim whose payout nonce a foreign transaction took (health:
 * `payout_nonce_taken`): after checking the chain, the old payout is marked `abandoned` and
 * the sender signs a new one for the claim at a new nonce. Once per claim, ever. Refused
 * unless the nonce is used at a final depth (PAYOUT_CONFIRMATIONS blocks) and none of the
 * payout's own attempts was mined: only then can its bytes never move USDC.
 *
 * A settle-and-pay payout also carried the claim's payment, which therefore never happened:
 * what follows it depends on the payer's authorization (reissueSettleAndPay.ts), never a plain
 * payout without a payment of the claim's own (docs/operating.md#reissuing-a-payout).
 */
export async function reissuePayout(
  deps: {
    sql: Database;
    wallet: Address;
    usdc: Address;
    payTo: Address;
    settleAndPay: { address: Address } | null;
    confirmations: number;
  },
  rpc: PublicClient,
  claimId: string,
): Promise<ReissueOutcome> {
  const { sql } = deps;
  const [claim] = await sql<
    { status: string }[]
  >`select status from app.claims where id = ${claimId}`;
  if (!claim) return { type: "claim_not_found" };
  const [abandoned] = await sql`
    select 1 from app.payouts where claim_id = ${claimId} and status = 'abandoned'`;
  if (abandoned) return { type: "already_reissued" };
  const [payout] = await sql<
    { nonce: bigint; nonce_taken_at: Date | null; settles_x402: boolean }[]
  >`
    select nonce, nonce_taken_at, settles_x402 from app.payouts
    where claim_id = ${claimId} and status in ('signed', 'broadcast')`;
  // A settle-and-pay payout's claim still awaits its payment (or was decided meanwhile by the
  // matcher or the settlement watcher): reissueSettleAndPay looks at its status.
  if (!payout?.nonce_taken_at || (!payout.settles_x402 && claim.status !== "paying")) {
    return {
      type: "not_waiting_on_taken_nonce",
      detail: `the claim is ${claim.status} and has no payout whose nonce was taken`,
    };
  }

  const head = await rpc.getBlockNumber({ cacheTime: 0 });
  const finalBlock = head - BigInt(deps.confirmations);
  const usedAtFinal =
    finalBlock >= 0n &&
    BigInt(await rpc.getTransactionCount({ address: deps.wallet, blockNumber: finalBlock })) >
      payout.nonce;
  if (!usedAtFinal) {
    return {
      type: "not_final",
      detail: `nonce ${payout.nonce} is not used ${deps.confirmations} blocks deep yet; a reorg could still mine the payout`,
    };
  }
  const attempts = await sql<{ tx_hash: Hex }[]>`
    select tx_hash from app.payout_attempts where nonce = ${payout.nonce}`;
  const receipts = await readReceipts(
    rpc,
    attempts.map((attempt) => attempt.tx_hash),
  );
  for (const attempt of attempts) {
    const receipt = receipts.get(attempt.tx_hash);
    if (receipt === undefined) {
      return { type: "not_final", detail: "the RPC did not answer for every attempt; try again" };
    }
    if (receipt) return { type: "attempt_mined", txHash: attempt.tx_hash };
  }

  if (payout.settles_x402) {
    return reissueSettleAndPay(deps, rpc, { claimId, nonce: payout.nonce });
  }
  const marked = await sql.begin(async (transaction) => {
    const abandoned = await abandonForReissue(transaction, payout.nonce);
    if (abandoned) await wakeWorker(transaction, WAKE_CHANNELS.payoutSender);
    return abandoned;
  });
  if (!marked)
    return { type: "not_waiting_on_taken_nonce", detail: "the payout changed meanwhile" };
  return { type: "reissued", nonce: payout.nonce };
}
