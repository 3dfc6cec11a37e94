import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Address } from "viem";
import type { NewClaim } from "../../api/claims/insertClaim.ts";
import { gatherClaimCreations } from "../../api/claims/openClaims.ts";
import { connectDatabase } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { createLogger } from "../../api/logger.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { freePort } from "../../test/support/ports.ts";
import { startEmbeddedPostgres } from "../devnet/embeddedPostgres.ts";
import { processTreeCpuSeconds } from "./benchProcess.ts";
import { memoryBackedDirectory } from "./benchStack.ts";

/**
 * `npm run bench:claims-db`: what PostgreSQL spends on a claim's creation, without HTTP. The
 * service's own gatherer (api/claims/openClaims.ts) on one connection to an embedded
 * PostgreSQL in memory; for each batch size, BENCH_CLAIMS (4,000) creations asked for in turns
 * of that many (each turn one call of `app.create_claims`, or `app.create_claim` alone for 1),
 * variant A, new payout addresses, each claim from a client of its own (the cap of open claims
 * checked). Printed per claim: the server's CPU time (its processes, from /proc) and the wall
 * time. The claims table is new and has no statistics, as in a new deployment (and in every
 * test and benchmark); BENCH_ANALYZE=1 analyzes it after the warm-up, as autovacuum does for a
 * database that has served a while. Run it at two commits to compare a change to the functions:
 * the figure moves by a tenth from run to run here, where `bench:http`'s route share moves by
 * a third. BENCH_SPACE_HELD=<share> (0.95, say) has that share of variant A's amount space held
 * before the warm-up, as a year of 10 million claims holds it (BENCHMARKS.md#a-year-of-traffic).
 */

const CLAIMS = Number(process.env.BENCH_CLAIMS ?? 4000);
const BATCH_SIZES = [1, 8, 32];
const WARM_UP_CLAIMS = 1000;
const SPACE_HELD = Number(process.env.BENCH_SPACE_HELD ?? 0);

const settings = {
  claims: {
    variant: "A" as const,
    lifetimeSeconds: 3600,
    expiryGraceSeconds: 0,
    amountHoldSeconds: 3600,
    amountSpaceSize: 999_999,
    amountSpaceWarnRatio: 0.5,
    openClaimsPerClient: 20,
    expiryIntervalMs: 1000,
  },
};

const request = (): NewClaim => ({
  flow: "claim",
  payoutAddress: `0x${randomBytes(20).toString("hex")}` as Address,
  agentName: "bench",
  // Every claim from its own client, as the cap is checked for each.
  clientKey: randomBytes(16).toString("hex"),
  reuseMinLifeSeconds: 600,
});

const directory = await mkdtemp(join(memoryBackedDirectory(), "claims-db-"));
await chmod(directory, 0o755);
const server = await startEmbeddedPostgres({
  dataDirectory: join(directory, "data"),
  port: await freePort(),
  durable: false,
});
const sql = connectDatabase(server.url(), { max: 1 });
try {
  await migrate(sql);
  const open = gatherClaimCreations(sql, settings, createLogger("warn", "bench"));
  const postmaster = server.process.pid as number;

  async function create(claims: number, batch: number): Promise<void> {
    for (let made = 0; made < claims; made += batch) {
      await Promise.all(Array.from({ length: batch }, () => open(request())));
    }
  }

  if (SPACE_HELD > 0) await holdAmounts(SPACE_HELD);
  await create(WARM_UP_CLAIMS, 8);
  // A database autovacuum has analyzed, as one that has served a while; without it, a new one.
  if (process.env.BENCH_ANALYZE === "1") await sql`analyze app.claims, app.amount_reservations`;
  console.log("batch  PostgreSQL CPU µs a claim  wall µs a claim");
  for (const batch of BATCH_SIZES) {
    const claims = Math.floor(CLAIMS / batch) * batch;
    const cpuBefore = await processTreeCpuSeconds(postmaster);
    const started = performance.now();
    await create(claims, batch);
    const wallMs = performance.now() - started;
    const cpuSeconds = (await processTreeCpuSeconds(postmaster)) - cpuBefore;
    console.log(
      `${String(batch).padStart(5)}  ${((cpuSeconds * 1e6) / claims).toFixed(0).padStart(25)}  ${((wallMs * 1e3) / claims).toFixed(0).padStart(15)}`,
    );
  }
} finally {
  await sql.end({ timeout: 1 });
  await server.stop();
  await rm(directory, { recursive: true, force: true });
}

/**
 * A random `share` of the amount space held for a day, each amount by a claim of its own: the
 * claims and their reservations as a busy year leaves them (expired unpaid, amounts still held).
 */
async function holdAmounts(share: number): Promise<void> {
  const size = settings.claims.amountSpaceSize;
  await sql.begin(async (transaction) => {
    // Without triggers or the foreign key (as yearOfTraffic.ts writes): the year's claims have
    // long been fanned out as events, so they add none here.
    await transaction`set local session_replication_role = replica`;
    await transaction`
      create temporary table held on commit drop as
      select ${PRICE_ATOMIC.toString()}::numeric + amount as amount, 'held-' || amount as claim_id
      from generate_series(1, ${size}::int) amount where random() < ${share}::float8`;
    await transaction`
      insert into app.claims (id, flow, payout_address, amount_due, expires_at, status)
      select claim_id, 'claim', '0x000000000000000000000000000000000000dead', amount,
        now() - interval '1 day', 'expired'
      from held`;
    await transaction`
      insert into app.amount_reservations (amount, claim_id, held_until)
      select amount, claim_id, now() + interval '1 day' from held`;
  });
  await sql`analyze app.claims, app.amount_reservations`;
  const [row] = await sql<
    { held: number }[]
  >`select count(*)::int as held from app.amount_reservations`;
  console.log(`${row?.held} of ${size} amounts held`);
}
