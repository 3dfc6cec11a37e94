import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import type { Sql } from "../../api/db/connect.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import type { BenchInfrastructure } from "./benchStack.ts";
import {
  type BurstClaim,
  createClaims,
  mineUntilPoolEmpty,
  sendAll,
  signPayments,
  topUpPayoutWallet,
  watchIndexedBlocks,
} from "./burstPayments.ts";

/**
 * bench:scale's whole loops on the chain (BENCHMARKS.md#a-year-of-traffic), run by the service
 * as it runs, on the empty database and on the year's: `payments` claims created over its HTTP
 * API (variant A, each its own amount), one exact payment for each, all mined in one block; its
 * CONFIRMATIONS blocks mined right after it, so the matcher's figure waits for no block time; then
 * blocks every `blockTimeSeconds`, as on Base, until every claim is `completed` (its payout mined).
 * The chain's automatic mining is off meanwhile and on again after (scale.ts's Anvil automines;
 * a chain that did not is left mining every `blockTimeSeconds`). Times are when a poll (every
 * 100 ms) of the claims' rows first saw them, from when the payments' block was mined.
 */
export interface LoopFigures {
  payments: number;
  /** Blocks the payments were mined in: 1 unless their gas passed the block gas limit. */
  paymentBlocks: number;
  confirmations: number;
  blockTimeSeconds: number;
  /** The payments' block mined → the indexer's checkpoint at its confirmation block. */
  indexedSeconds: number;
  /** The payments' block mined → every claim past `awaiting_payment`. */
  matchedSeconds: number;
  /** The indexer at the confirmation block → every claim past `awaiting_payment`: the matcher's own time. */
  matcherSeconds: number;
  /** The payments' block mined → every claim `completed`. */
  completedSeconds: number;
  /**
   * The payments' block mined → the last payout signed and the last broadcast (the rows' own
   * `now()`): the service's share of the burst, before the wait for the next block.
   */
  signedSeconds: number;
  broadcastSeconds: number;
  /** The first claim past `awaiting_payment` → every claim `completed`: the payout burst. */
  payoutSeconds: number;
  payoutsPerSecond: number;
  /** Blocks the payouts were mined in, first to last. */
  payoutBlocks: number;
  /** Claims matched and completed when the wait ended (`payments` each, unless it timed out). */
  matched: number;
  completed: number;
  /**
   * Claims that opened at the plain price on the way to `payments` with a unique amount (variant
   * A's space nearly full, as a year holds it): payable only from their payout address, whose key
   * the bench does not hold, so left unpaid; a client follows the claim's own instructions.
   */
  withoutUniqueAmount: number;
}

export async function measureLoops(
  infrastructure: BenchInfrastructure,
  options: {
    serviceUrl: string;
    /** A pool on the service's database, to read the claims' and payouts' rows. */
    sql: Sql;
    payments?: number;
    blockTimeSeconds?: number;
    timeoutMs?: number;
    log?: (line: string) => void;
  },
): Promise<LoopFigures> {
  const count = options.payments ?? 1000;
  const blockTimeSeconds = options.blockTimeSeconds ?? 2;
  const log = options.log ?? (() => {});
  const { client } = infrastructure;
  const confirmations = parseServiceConfig(infrastructure.env).chain.confirmations;

  await topUpPayoutWallet(infrastructure, count);
  const { claims, withoutUniqueAmount } = await claimsWithUniqueAmounts(options.serviceUrl, count);
  if (withoutUniqueAmount > 0) {
    log(
      `  loops: ${withoutUniqueAmount} claims opened without a unique amount on the way (payable only from their payout address), left unpaid`,
    );
  }
  const ids = claims.map((claim) => claim.claimId);
  const raw = await signPayments(infrastructure, claims);
  const wasAutomine = await client.getAutomine();
  const indexing = watchIndexedBlocks(options.sql);
  try {
    // Hold the chain still while the payments enter the pool, then mine them in one block.
    await client.setIntervalMining({ interval: 0 });
    await sendAll(infrastructure.anvil.rpcUrl, raw);
    await client.mine({ blocks: 1 });
    const minedAt = Date.now();
    const paymentBlocks = 1 + (await mineUntilPoolEmpty(infrastructure));
    const paymentBlock = await client.getBlockNumber({ cacheTime: 0 });
    if (confirmations > 0) await client.mine({ blocks: confirmations });
    await client.setIntervalMining({ interval: blockTimeSeconds });
    log(
      `  loops: ${count} payments mined in ${paymentBlocks} block(s) (block ${paymentBlock}), ${confirmations} more mined on top`,
    );

    const progress = await untilCompleted(options.sql, ids, options.timeoutMs ?? 10 * 60_000);
    const seconds = (at: number | null) => (at === null ? Number.NaN : (at - minedAt) / 1000);
    const indexedSeconds = seconds(
      indexing.seenAt.get(paymentBlock + BigInt(confirmations)) ?? null,
    );
    const payoutSeconds =
      progress.completedAt === null || progress.firstMatchedAt === null
        ? Number.NaN
        : (progress.completedAt - progress.firstMatchedAt) / 1000;
    const figures: LoopFigures = {
      payments: count,
      paymentBlocks,
      confirmations,
      blockTimeSeconds,
      indexedSeconds,
      matchedSeconds: seconds(progress.matchedAt),
      matcherSeconds: seconds(progress.matchedAt) - indexedSeconds,
      completedSeconds: seconds(progress.completedAt),
      payoutSeconds,
      payoutsPerSecond: progress.completed / payoutSeconds,
      ...(await payoutRows(options.sql, ids, minedAt)),
      matched: progress.matched,
      completed: progress.completed,
      withoutUniqueAmount,
    };
    log(
      `  loops: ${figures.matched}/${count} matched ${figures.matchedSeconds.toFixed(2)} s after their block (indexed at ${figures.indexedSeconds.toFixed(2)} s, the matcher ${figures.matcherSeconds.toFixed(2)} s), ${figures.completed}/${count} completed at ${figures.completedSeconds.toFixed(2)} s (the last signed at ${figures.signedSeconds.toFixed(2)} s, broadcast at ${figures.broadcastSeconds.toFixed(2)} s): payouts ${figures.payoutSeconds.toFixed(2)} s from the first match, ${figures.payoutsPerSecond.toFixed(0)}/s, in ${figures.payoutBlocks} block(s) of ${blockTimeSeconds} s`,
    );
    return figures;
  } finally {
    await indexing.stop();
    if (wasAutomine) await client.setAutomine(true);
  }
}

/**
 * `count` claims that each hold a unique amount (variant A), created over the API as clients
 * would; those that open at the plain price on the way are counted, not paid. Gives up after
 * five times `count` creations: a space that full is a finding of its own.
 */
async function claimsWithUniqueAmounts(serviceUrl: string, count: number) {
  const claims: BurstClaim[] = [];
  let withoutUniqueAmount = 0;
  while (claims.length < count) {
    if (claims.length + withoutUniqueAmount > 5 * count) {
      throw new Error(
        `${withoutUniqueAmount} of ${claims.length + withoutUniqueAmount} claims opened without a unique amount`,
      );
    }
    for (const claim of await createClaims(serviceUrl, count - claims.length)) {
      if (claim.amountDue === PRICE_ATOMIC) withoutUniqueAmount += 1;
      else claims.push(claim);
    }
  }
  return { claims, withoutUniqueAmount };
}

/**
 * Polls the claims by id every 100 ms until all are `completed` or `timeoutMs` passes: when the
 * first and the last left `awaiting_payment`, and when the last completed (null if not seen).
 */
async function untilCompleted(sql: Sql, ids: string[], timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let firstMatchedAt: number | null = null;
  let matchedAt: number | null = null;
  let completedAt: number | null = null;
  let matched = 0;
  let completed = 0;
  while (completedAt === null && Date.now() < deadline) {
    const [row] = await sql<{ matched: number; completed: number }[]>`
      select count(*) filter (where status <> 'awaiting_payment')::int as matched,
        count(*) filter (where status = 'completed')::int as completed
      from app.claims where id = any(${ids})`;
    const at = Date.now();
    matched = row?.matched ?? 0;
    completed = row?.completed ?? 0;
    if (matched > 0) firstMatchedAt ??= at;
    if (matched === ids.length) matchedAt ??= at;
    if (completed === ids.length) completedAt = at;
    else await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { firstMatchedAt, matchedAt, completedAt, matched, completed };
}

/** The payouts' blocks, first to last, and when the last was signed and broadcast. */
async function payoutRows(sql: Sql, ids: string[], minedAt: number) {
  const [row] = await sql<
    {
      first: string | null;
      last: string | null;
      signed_ms: number | null;
      broadcast_ms: number | null;
    }[]
  >`
    select min(block_number)::text as first, max(block_number)::text as last,
      (extract(epoch from max(created_at)) * 1000)::float8 as signed_ms,
      (extract(epoch from max(last_broadcast_at)) * 1000)::float8 as broadcast_ms
    from app.payouts where claim_id = any(${ids})`;
  const seconds = (at: number | null | undefined) =>
    at === null || at === undefined ? Number.NaN : (at - minedAt) / 1000;
  return {
    signedSeconds: seconds(row?.signed_ms),
    broadcastSeconds: seconds(row?.broadcast_ms),
    payoutBlocks: row?.first && row.last ? Number(BigInt(row.last) - BigInt(row.first) + 1n) : 0,
  };
}
