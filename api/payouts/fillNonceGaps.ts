import { type Hex, type PrivateKeyAccount, type PublicClient, parseTransaction } from "viem";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { keccak256 } from "../signing/keccak256.ts";
import { type PayoutFees, readCurrentFees, replacementFees } from "./payoutFees.ts";
import { sendRawTransactions } from "./payoutRpc.ts";

/** Empty nonces seen below our oldest unmined payout, with when each was first seen. */
export type GapState = Map<bigint, number>;

const MAX_FILLERS_PER_ROUND = 50;

interface HeldNonce {
  nonce: bigint;
  /** A filler's stored transaction; null for a nonce a payout holds. */
  raw_tx: Hex | null;
  /** The filler was signed PAYOUT_REPLACE_SECONDS ago or more, and is not mined. */
  replace_due: boolean;
}

interface SupersededNonce {
  nonce: bigint;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
}

/**
 * A nonce below our oldest unmined payout that no payout of ours holds (another process with
 * the key sent a transaction there and it was dropped) stalls every payout after it. Once such
 * a gap has stayed empty for PAYOUT_NONCE_GAP_SECONDS, it is filled with a zero-value
 * transaction from the payout wallet to itself, stored before it is sent and sent again while
 * the gap lasts. A gap our own payouts left (a reorg took one away) is not filled: the watcher
 * sends those bytes again.
 *
 * One exception (docs/operating.md#payout-reorgs): a reorg deeper than PAYOUT_CONFIRMATIONS took
 * away a payout that must never be sent again, because its claim has been paid by a later payout
 * since (an operator re-issued it, or it had reverted and was final). Its nonce is filled at once,
 * at fees above every attempt of that payout, so that a node still holding its bytes takes the
 * filler instead.
 *
 * A filler is re-priced like a payout (unstickPayouts.ts): still unmined PAYOUT_REPLACE_SECONDS
 * after it was signed, it is signed again at the same nonce with higher fees (a base fee that
 * rose past its max fee would hold it, and every payout behind it, for good).
 */
export async function fillNonceGaps(
  deps: { sql: Database; config: ServiceConfig; logger: Logger },
  rpc: PublicClient,
  account: PrivateKeyAccount,
  gaps: GapState,
): Promise<number> {
  const { sql, config, logger } = deps;
  const latest = BigInt(
    await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }),
  );
  const [[lowest], superseded] = await Promise.all([
    sql<{ nonce: bigint | null }[]>`
      select min(nonce) as nonce from app.payouts where status in ('signed', 'broadcast')`,
    readSupersededNonces(sql, latest),
  ]);
  const highestSuperseded = superseded.at(-1)?.nonce;
  let upTo = lowest?.nonce ?? null;
  if (highestSuperseded !== undefined && (upTo === null || highestSuperseded >= upTo)) {
    upTo = highestSuperseded + 1n;
  }
  if (upTo === null || upTo <= latest) {
    gaps.clear();
    return 0;
  }
  const supersededAt = new Map(superseded.map((row) => [row.nonce, row]));
  const held = await sql<HeldNonce[]>`
    select nonce, null as raw_tx, false as replace_due from app.payouts
    where nonce >= ${latest} and nonce < ${upTo}
      and nonce <> all(${superseded.map((row) => String(row.nonce))}::int8[])
    union all
    select nonce, raw_tx,
      signed_at < now() - make_interval(secs => ${config.payouts.replaceAfterMs / 1000})
    from app.nonce_fillers where nonce >= ${latest} and nonce < ${upTo}`;
  const heldNonces = new Set(held.map((row) => row.nonce));
  const now = Date.now();
  const due: bigint[] = [];
  for (let nonce = latest; nonce < upTo && due.length < MAX_FILLERS_PER_ROUND; nonce++) {
    if (heldNonces.has(nonce)) continue;
    const since = gaps.get(nonce) ?? now;
    gaps.set(nonce, since);
    if (supersededAt.has(nonce) || now - since >= config.payouts.nonceGapMs) due.push(nonce);
  }
  for (const nonce of gaps.keys()) if (nonce < latest) gaps.delete(nonce);

  const stale = held.filter((row) => row.raw_tx !== null && row.replace_due);
  const resend = held.flatMap((row) => (row.raw_tx && !row.replace_due ? [row.raw_tx] : []));
  let signed = 0;
  if (due.length > 0 || stale.length > 0) {
    const current = await readCurrentFees(rpc, config.payouts.maxFeePerGas);
    const fillers: { nonce: string; tx_hash: Hex; raw_tx: Hex }[] = [];
    for (const nonce of due) {
      const above = supersededAt.get(nonce);
      const fees = above
        ? (replacementFees(
            {
              maxFeePerGas: BigInt(above.max_fee_per_gas),
              maxPriorityFeePerGas: BigInt(above.max_priority_fee_per_gas),
            },
            current,
            config.payouts.maxFeePerGas,
          ) ?? current)
        : current;
      fillers.push(await signFiller(account, config, nonce, fees));
    }
    const repriced: { nonce: string; tx_hash: Hex; raw_tx: Hex }[] = [];
    for (const filler of stale) {
      const previous = parseTransaction(filler.raw_tx as Hex);
      const fees = replacementFees(
        {
          maxFeePerGas: previous.maxFeePerGas ?? 0n,
          maxPriorityFeePerGas: previous.maxPriorityFeePerGas ?? 0n,
        },
        current,
        config.payouts.maxFeePerGas,
      );
      // At the fee cap: nothing to replace it with, it keeps being sent as it is.
      if (!fees) {
        resend.push(filler.raw_tx as Hex);
        continue;
      }
      repriced.push(await signFiller(account, config, filler.nonce, fees));
    }
    if (fillers.length > 0) {
      await sql`insert into app.nonce_fillers ${sql(fillers)} on conflict (nonce) do nothing`;
      logger.warn(
        { nonces: due.map(String), wallet: account.address },
        "filling nonces another sender left empty, or a payout that must not be sent again held, with zero-value transactions to ourselves",
      );
    }
    for (const filler of repriced) {
      await sql`
        update app.nonce_fillers
        set tx_hash = ${filler.tx_hash}, raw_tx = ${filler.raw_tx}, signed_at = now()
        where nonce = ${filler.nonce}`;
    }
    if (repriced.length > 0) {
      logger.warn(
        { nonces: repriced.map((filler) => filler.nonce), wallet: account.address },
        "nonce fillers still unmined replaced with higher fees (same nonce)",
      );
    }
    signed = fillers.length + repriced.length;
    // Lowest nonces first: the node takes them in order.
    const fresh = [...fillers, ...repriced].sort((a, b) =>
      Number(BigInt(a.nonce) - BigInt(b.nonce)),
    );
    resend.unshift(...fresh.map((filler) => filler.raw_tx));
    // A node may have dropped the payouts queued behind the gap: send them again with it.
    const behind = await sql<{ raw_tx: Hex }[]>`
      select raw_tx from app.payouts where status in ('signed', 'broadcast')
      order by nonce limit ${config.payouts.batchSize}`;
    resend.push(...behind.map((payout) => payout.raw_tx));
  }
  if (resend.length > 0) await sendRawTransactions(rpc, resend);
  return signed;
}

/**
 * Payouts at or above the chain's nonce that must never be sent again: re-issued by an operator
 * (`abandoned`), or reverted and followed by a later payout of the same claim. Only a reorg
 * deeper than PAYOUT_CONFIRMATIONS puts them there. With the highest fees any of their attempts
 * offered, lowest nonce first.
 */
async function readSupersededNonces(sql: Database, latest: bigint): Promise<SupersededNonce[]> {
  return sql<SupersededNonce[]>`
    select p.nonce, max(a.max_fee_per_gas)::text as max_fee_per_gas,
      max(a.max_priority_fee_per_gas)::text as max_priority_fee_per_gas
    from app.payouts p
    join app.payout_attempts a on a.nonce = p.nonce
    where p.nonce >= ${latest}
      and (p.status = 'abandoned'
        or (p.status = 'reverted' and exists (
          select 1 from app.payouts later where later.claim_id = p.claim_id and later.nonce > p.nonce)))
    group by p.nonce
    order by p.nonce`;
}

async function signFiller(
  account: PrivateKeyAccount,
  config: ServiceConfig,
  nonce: bigint,
  fees: PayoutFees,
): Promise<{ nonce: string; tx_hash: Hex; raw_tx: Hex }> {
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
}
