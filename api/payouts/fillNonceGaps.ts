import type { Hex, PrivateKeyAccount, PublicClient } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { keccak256 } from "../signing/keccak256.ts";
import { readCurrentFees } from "./payoutFees.ts";
import { sendRawTransactions } from "./payoutRpc.ts";

/** Empty nonces seen below our oldest unmined payout, with when each was first seen. */
export type GapState = Map<bigint, number>;

const MAX_FILLERS_PER_ROUND = 50;

/**
 * A nonce below our oldest unmined payout that no payout of ours holds (another process with
 * the key sent a transaction there and it was dropped) stalls every payout after it. Once such
 * a gap has stayed empty for PAYOUT_NONCE_GAP_SECONDS, it is filled with a zero-value
 * transaction from the payout wallet to itself, stored before it is sent and sent again while
 * the gap lasts. A gap our own payouts left (a reorg took one away) is not filled: the watcher
 * sends those bytes again.
 */
export async function fillNonceGaps(
  deps: { sql: Database; config: ServiceConfig; logger: Logger },
  rpc: PublicClient,
  account: PrivateKeyAccount,
  gaps: GapState,
): Promise<number> {
  const { sql, config, logger } = deps;
  const [lowest] = await sql<{ nonce: bigint | null }[]>`
    select min(nonce) as nonce from app.payouts where status in ('signed', 'broadcast')`;
  const latest = BigInt(
    await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }),
  );
  if (lowest?.nonce == null || lowest.nonce <= latest) {
    gaps.clear();
    return 0;
  }
  const held = await sql<{ nonce: bigint; raw_tx: Hex | null }[]>`
    select nonce, null as raw_tx from app.payouts where nonce >= ${latest} and nonce < ${lowest.nonce}
    union all
    select nonce, raw_tx from app.nonce_fillers where nonce >= ${latest} and nonce < ${lowest.nonce}`;
  const heldNonces = new Set(held.map((row) => row.nonce));
  const now = Date.now();
  const due: bigint[] = [];
  for (let nonce = latest; nonce < lowest.nonce && due.length < MAX_FILLERS_PER_ROUND; nonce++) {
    if (heldNonces.has(nonce)) continue;
    const since = gaps.get(nonce) ?? now;
    gaps.set(nonce, since);
    if (now - since >= config.payouts.nonceGapMs) due.push(nonce);
  }
  for (const nonce of gaps.keys()) if (nonce < latest) gaps.delete(nonce);

  const resend = held.flatMap((row) => (row.raw_tx ? [row.raw_tx] : []));
  if (due.length > 0) {
    const fees = await readCurrentFees(rpc, config.payouts.maxFeePerGas);
    const fillers = await Promise.all(
      due.map(async (nonce) => {
        const rawTx = await account.signTransaction({
          type: "eip1559",
          chainId: config.chain.chainId,
          nonce: Number(nonce),
          to: account.address,
          value: 0n,
          gas: 21_000n,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        });
        return { nonce: String(nonce), tx_hash: keccak256(rawTx), raw_tx: rawTx };
      }),
    );
    await sql`insert into app.nonce_fillers ${sql(fillers)} on conflict (nonce) do nothing`;
    logger.warn(
      { nonces: due.map(String), wallet: account.address },
      "filling nonces another sender left empty with zero-value transactions to ourselves",
    );
    resend.push(...fillers.map((filler) => filler.raw_tx));
    // A node may have dropped the payouts queued behind the gap: send them again with it.
    const behind = await sql<{ raw_tx: Hex }[]>`
      select raw_tx from app.payouts where status in ('signed', 'broadcast')
      order by nonce limit ${config.payouts.batchSize}`;
    resend.push(...behind.map((payout) => payout.raw_tx));
  }
  if (resend.length > 0) await sendRawTransactions(rpc, resend);
  return due.length;
}
