import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Hex } from "viem";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { type MatchedPayment, recordPayments } from "../../api/lifecycle/recordPayments.ts";
import { storeConfirmedTogether } from "../../api/payouts/payoutRecords.ts";
import { freePort } from "../../test/support/ports.ts";
import { startEmbeddedPostgres } from "../devnet/embeddedPostgres.ts";
import { machineState, writeBenchResult } from "./benchResult.ts";

/**
 * `npm run bench:ledger-triggers` (BENCHMARKS.md#the-ledgers-triggers): what the triggers of
 * api/db/definitions/ledger_stats.sql cost the writes of the ledger's entries, each write timed
 * with the triggers and with them disabled, in rounds that alternate, on an embedded PostgreSQL
 * of its own. A round is BENCH_ROWS (1,000) new claims taken through the writes one batch each:
 * the matcher's recordPayments (awaiting_payment → paid, a payment each), the confirmer's
 * storeConfirmedTogether (broadcast payouts confirmed together), then the claims completed in
 * one update (every entry moves: the costliest case). BENCH_ROUNDS (5) rounds each way.
 */

const ROWS = Number(process.env.BENCH_ROWS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TRIGGERS = [
  ["app.claims", "ledger_follows_claims"],
  ["app.payouts", "ledger_follows_new_payouts"],
  ["app.payouts", "ledger_follows_payouts"],
  ["app.payouts", "ledger_follows_deleted_payouts"],
  ["app.payments", "ledger_follows_payments"],
  ["app.payments", "ledger_follows_changed_payments"],
] as const;
const WRITES = ["recordPayments", "storeConfirmedTogether", "claims completed"] as const;

const directory = await mkdtemp(join(tmpdir(), "ledger-triggers-pg-"));
await chmod(directory, 0o755);
const server = await startEmbeddedPostgres({
  dataDirectory: join(directory, "data"),
  port: await freePort(),
  durable: false,
});
const sql = connectDatabase(server.url(), { max: 1, name: "ledger triggers bench" });
try {
  await migrate(sql);
  await sql`call app.count_ledger_figures()`;
  const timings = { with: new Map<string, number[]>(), without: new Map<string, number[]>() };
  for (let round = 0; round < 2 * ROUNDS; round += 1) {
    const triggers = round % 2 === 0 ? "with" : "without";
    await setTriggers(sql, triggers === "with");
    const times = await timeRound(sql, round * ROWS);
    for (const write of WRITES) {
      timings[triggers].set(write, [...(timings[triggers].get(write) ?? []), times[write]]);
    }
  }
  await setTriggers(sql, true);
  const rows = WRITES.map((write) => ({
    write,
    with: median(timings.with.get(write) ?? []),
    without: median(timings.without.get(write) ?? []),
  }));
  console.log(`\n${ROWS} rows a write, median of ${ROUNDS} rounds each way\n`);
  console.log("| write | with the triggers | without | cost |");
  console.log("|---|---|---|---|");
  for (const row of rows) {
    console.log(
      `| ${row.write} | ${row.with.toFixed(0)} ms | ${row.without.toFixed(0)} ms | ${(row.with / row.without).toFixed(1)}× |`,
    );
  }
  console.log(JSON.stringify(machineState()));
  await writeBenchResult({ rows: ROWS, rounds: ROUNDS, results: rows });
} finally {
  await sql.end();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
}

async function setTriggers(sql: Database, enabled: boolean): Promise<void> {
  for (const [table, trigger] of TRIGGERS) {
    // The bench's own constant names.
    await sql.unsafe(`alter table ${table} ${enabled ? "enable" : "disable"} trigger ${trigger}`);
  }
}

/** One round's claims through the three writes; milliseconds each. */
async function timeRound(
  sql: Database,
  first: number,
): Promise<Record<(typeof WRITES)[number], number>> {
  const ids = Array.from({ length: ROWS }, (_, index) => `clm_bench_${first + index}`);
  await sql`
    insert into app.claims (id, flow, payout_address, amount_due, status, expires_at)
    select id, 'claim', '0x' || lpad(to_hex(i % 50), 40, 'e'), 10000000 + ${first} + i,
      'awaiting_payment', now() + interval '7 days'
    from unnest(${ids}::text[]) with ordinality as t(id, i)`;
  const payments: MatchedPayment[] = ids.map((claimId, index) => ({
    claimId,
    matchedBy: "sender",
    transfer: {
      txHash: `0x${(first + index).toString(16).padStart(64, "0")}`,
      logIndex: 0,
      blockNumber: 1n,
      blockHash: `0x${"1".repeat(64)}`,
      from: `0x${"a".repeat(40)}`,
      value: 10_000_000n + BigInt(first + index),
      transferOrdinal: 1,
      authorizationNonce: null,
    },
    verified: true,
  }));
  let at = performance.now();
  await sql.begin((transaction) => recordPayments(transaction, payments));
  const recorded = performance.now() - at;

  await sql`update app.claims set status = 'paying' where id = any(${ids})`;
  await sql`
    insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status)
    select id, '0x' || lpad(to_hex(i % 50), 40, 'e'), 1000000, ${first} + i,
      '0xb' || lpad(to_hex(${first} + i), 63, '0'), '0x00', 'broadcast'
    from unnest(${ids}::text[]) with ordinality as t(id, i)`;
  await sql`
    insert into app.payout_attempts (tx_hash, claim_id, nonce, raw_tx, max_fee_per_gas,
      max_priority_fee_per_gas)
    select tx_hash, claim_id, nonce, raw_tx, 1, 1 from app.payouts where claim_id = any(${ids})`;
  const payouts = await sql<{ nonce: string; tx_hash: Hex }[]>`
    select nonce::text, tx_hash from app.payouts where claim_id = any(${ids})`;
  const mined = payouts.map((payout) => ({
    nonce: BigInt(payout.nonce),
    txHash: payout.tx_hash,
    blockNumber: 2n,
    blockHash: `0x${"2".repeat(64)}` as Hex,
  }));
  at = performance.now();
  await storeConfirmedTogether(sql, mined);
  const confirmed = performance.now() - at;

  at = performance.now();
  await sql`update app.claims set status = 'completed', completed_at = now()
    where id = any(${ids})`;
  const completed = performance.now() - at;
  return {
    recordPayments: recorded,
    storeConfirmedTogether: confirmed,
    "claims completed": completed,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}
