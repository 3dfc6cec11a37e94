import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { getAddress, type Hex } from "viem";
import { insertClaim } from "../../api/claims/insertClaim.ts";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { recordPayments } from "../../api/lifecycle/recordPayments.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { samplePeakRss, startServiceProcess } from "./benchProcess.ts";
import { percentile, startBenchInfrastructure, watchBlockArrivals } from "./benchStack.ts";

/**
 * The payout path alone (a diagnostic, not part of `npm run bench`): BENCH_BURST claims (5,000)
 * become `paid` in one transaction, as if the matcher had matched them all at once, and the
 * service (its own process, default loops) signs, stores, broadcasts and confirms their payouts
 * on Anvil with 2 s blocks and Base's 400M block gas. No payments to mine, so a run takes a
 * minute, not ten. Prints the blocks and seconds from the commit to the last payout's block, the
 * payouts per block, and stage times. BENCH_CPU_PROF and BENCH_SERVICE_LOG as in payouts.ts.
 */

const BURST = Number(process.env.BENCH_BURST ?? 5000);
const BLOCK_GAS_LIMIT = 400_000_000n;

const infrastructure = await startBenchInfrastructure({
  blockTimeSeconds: 2,
  gasLimit: BLOCK_GAS_LIMIT,
  serviceEnv: { CONFIRMATIONS: "3", RATE_LIMIT_ENABLED: "false", OPEN_CLAIMS_PER_CLIENT: "0" },
  // BENCH_NO_INDEXER=1: without Ponder, whose reads of each block compete for the node.
  indexer: !process.env.BENCH_NO_INDEXER,
});
try {
  const service = await startServiceProcess(infrastructure.env);
  infrastructure.onStop(service.stop);
  const sql = postgres(infrastructure.databaseUrl, { max: 2, onnotice: () => {} });
  infrastructure.onStop(() => sql.end());
  // The payout wallet holds 10,000 USDC on the devnet: enough for 10,000 payouts.
  const config = parseServiceConfig(infrastructure.env);

  // Claims first (not yet paid), then every payment in one transaction: the sender sees them all at once.
  const ids: string[] = [];
  await sql.begin(async (transaction) => {
    for (let index = 0; index < BURST; index += 1) {
      const inserted = await insertClaim(transaction as never, config, {
        flow: "claim",
        payoutAddress: getAddress(`0x${randomBytes(20).toString("hex")}`),
      });
      if (inserted.type !== "created") throw new Error(`claim not created: ${inserted.type}`);
      ids.push(inserted.claim.id);
    }
  });
  console.error(`${ids.length} claims created`);
  const arrivals = watchBlockArrivals(infrastructure);
  const rss = samplePeakRss(service);
  const startBlock = await infrastructure.client.getBlockNumber({ cacheTime: 0 });
  const paidAt = Date.now();
  await sql.begin((transaction) =>
    recordPayments(
      transaction as never,
      ids.map((claimId, index) => ({
        claimId,
        matchedBy: "amount" as const,
        transfer: {
          txHash: `0x${randomBytes(32).toString("hex")}` as Hex,
          logIndex: index,
          blockNumber: startBlock,
          blockHash: `0x${randomBytes(32).toString("hex")}`,
          from: `0x${randomBytes(20).toString("hex")}`,
          value: PRICE_ATOMIC,
          transferOrdinal: 1,
          authorizationNonce: null,
        },
        verified: true,
      })),
    ),
  );
  console.error(`${ids.length} claims paid at block ${startBlock}`);
  const deadline = Date.now() + 15 * 60_000;
  while (Date.now() < deadline) {
    const [row] = await sql<{ done: number }[]>`
      select count(*)::int as done from app.claims where status = 'completed'`;
    if (row?.done === ids.length) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const peakRss = rss.stop();
  await arrivals.stop();
  const rows = await sql<
    { block: string | null; signed_ms: number; broadcast_ms: number; completed_ms: number }[]
  >`
    select po.block_number::text as block,
      (extract(epoch from po.created_at) * 1000)::float8 as signed_ms,
      (extract(epoch from po.last_broadcast_at) * 1000)::float8 as broadcast_ms,
      (extract(epoch from c.completed_at) * 1000)::float8 as completed_ms
    from app.claims c join app.payouts po on po.claim_id = c.id`;
  const perBlock = new Map<string, number>();
  for (const row of rows) {
    if (row.block) perBlock.set(row.block, (perBlock.get(row.block) ?? 0) + 1);
  }
  const blocks = [...perBlock.keys()].map(BigInt).sort((a, b) => (a < b ? -1 : 1));
  const last = blocks.at(-1) ?? startBlock;
  const seconds = (values: number[]) =>
    `${((Math.min(...values) - paidAt) / 1000).toFixed(2)} / ${((percentile(values, 50) - paidAt) / 1000).toFixed(2)} / ${((Math.max(...values) - paidAt) / 1000).toFixed(2)} s`;
  console.log(
    [
      `${rows.length} payouts for ${ids.length} claims paid at block ${startBlock}`,
      `  last payout in block ${last} (+${last - startBlock}), ${((Number(arrivals.seenAt.get(last) ?? Number.NaN) - paidAt) / 1000).toFixed(2)} s after the commit`,
      `  payouts per block: ${blocks.map((block) => `${block - startBlock}:${perBlock.get(String(block))}`).join(" ")}`,
      `  signed (first/median/last): ${seconds(rows.map((row) => row.signed_ms))}`,
      // A payout confirmed before its broadcast was recorded keeps no broadcast time.
      `  broadcast: ${seconds(rows.flatMap((row) => (row.broadcast_ms ? [row.broadcast_ms] : [])))}`,
      `  completed: ${seconds(rows.flatMap((row) => (row.completed_ms ? [row.completed_ms] : [])))}`,
      `  service peak RSS ${peakRss.toFixed(0)} MiB`,
    ].join("\n"),
  );
} finally {
  await infrastructure.stop();
}
