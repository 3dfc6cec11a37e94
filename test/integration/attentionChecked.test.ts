import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readIndexerTables } from "../../api/chain/indexerSchema.ts";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import {
  checkAttentionThrough,
  createAttentionCheckWorker,
  NOTHING_CHECKED,
  readAttentionMarks,
} from "../../api/health/attentionChecked.ts";
import { readAttention, readAttentionBothWays } from "../../api/health/readAttention.ts";
import type { ServiceDeps } from "../../api/serviceDeps.ts";
import { readAttentionAsFirstRead } from "../support/attentionAsFirstRead.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { holdTableLock } from "../support/tableLock.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * The attention counts read only what is after the attention check's marks, or held behind them
 * (api/health/attentionChecked.ts, docs/operating.md#attention-checked-through), and count exactly
 * what a read of every row counts: here, rows that come to need attention after the marks have
 * passed them. The indexer's tables are written by the test in Ponder's shapes (ponder.schema.ts,
 * its checkpoint table, the views of schema `chain`): a reorg's result at a chosen block above or
 * below Ponder's finalized block is what matters, and a devnet cannot place one there on demand
 * (test/attacks/moneyAttacks.test.ts runs the real reorgs, with the worker running).
 */

const DEPTH = { chainId: 8453, confirmations: 3 };
const FINALIZED = 50;
const LATEST = 100;

let database: TestDatabase;
let sql: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase(database.url, { max: 4 });
});

afterAll(async () => {
  await sql?.end();
  await database?.drop();
});

beforeEach(async () => {
  await sql`drop schema if exists chain cascade`;
  await sql`drop schema if exists indexer_one cascade`;
  await sql`drop schema if exists indexer_two cascade`;
  await sql`truncate app.attention_checked, app.attention_held`;
  await sql`truncate app.payout_attempts, app.payouts, app.payments, app.claims cascade`;
  await indexer("indexer_one");
  await checkpoint(LATEST, FINALIZED);
});

/** Ponder's tables in `schema`, and the views of `chain` on them, as `ponder start` makes them. */
async function indexer(schema: string) {
  await indexerTables(schema);
  await sql.unsafe(`
    create schema if not exists chain;
    create or replace view chain.incoming_transfer as select * from ${schema}.incoming_transfer;
    create or replace view chain.outgoing_transfer as select * from ${schema}.outgoing_transfer;
    create or replace view chain._ponder_checkpoint as select * from ${schema}._ponder_checkpoint;`);
}

async function indexerTables(schema: string) {
  await sql.unsafe(`
    create schema ${schema};
    create table ${schema}.incoming_transfer (tx_hash text not null, log_index integer not null,
      block_number numeric(78, 0) not null, block_hash text not null,
      block_timestamp numeric(78, 0) not null, transaction_index integer not null,
      "from" text not null, "to" text not null, value numeric(78, 0) not null,
      authorization_nonce text, primary key (tx_hash, log_index));
    create index on ${schema}.incoming_transfer (block_number, log_index);
    create index on ${schema}.incoming_transfer (authorization_nonce);
    create table ${schema}.outgoing_transfer (tx_hash text not null, log_index integer not null,
      block_number numeric(78, 0) not null, block_hash text not null,
      block_timestamp numeric(78, 0) not null, transaction_index integer not null,
      "from" text not null, "to" text not null, value numeric(78, 0) not null,
      primary key (tx_hash, log_index));
    create index on ${schema}.outgoing_transfer (block_number, log_index);
    create table ${schema}._ponder_checkpoint (chain_name text primary key, chain_id bigint not null,
      safe_checkpoint varchar(75) not null, latest_checkpoint varchar(75) not null,
      finalized_checkpoint varchar(75) not null);`);
}

/** Ponder's checkpoint: 10 digits of timestamp, 16 of chain id, 16 of block number, the rest. */
async function checkpoint(latest: number, finalized: number, schema = "indexer_one") {
  const at = (block: number) =>
    `${"0".repeat(10)}${String(DEPTH.chainId).padStart(16, "0")}${String(block).padStart(16, "0")}${"9".repeat(33)}`;
  await sql.unsafe(
    `insert into ${schema}._ponder_checkpoint values ('base', $1, $2, $3, $4)
     on conflict (chain_name) do update set latest_checkpoint = excluded.latest_checkpoint,
       finalized_checkpoint = excluded.finalized_checkpoint`,
    [DEPTH.chainId, at(finalized), at(latest), at(finalized)],
  );
}

const hash = (label: string) => `0x${Buffer.from(label).toString("hex").padEnd(64, "0")}`;
const PAYER = `0x${"a".repeat(40)}`;
const WALLET = `0x${"b".repeat(40)}`;

/**
 * A claim paid by `payment` (its transfer `paymentTx`) and paid out by the payout at `nonce`
 * with one attempt (`payoutTx`).
 */
async function paidOut(options: {
  claim: string;
  nonce: number;
  status?: string;
  final?: boolean;
  paymentBlock?: number;
}) {
  const { claim, nonce } = options;
  await sql`
    insert into app.claims (id, flow, payout_address, amount_due, status, expires_at, paid_at)
    values (${claim}, 'claim', ${PAYER}, 10000000, 'paying', now() + interval '7 days', now())`;
  await sql`
    insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
      from_address, value, matched_by)
    values (${hash(`pay-${claim}`)}, 0, ${claim}, ${options.paymentBlock ?? 10},
      ${hash("block")}, ${PAYER}, 10000000, 'sender')`;
  await sql`
    insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status, final_at)
    values (${claim}, ${PAYER}, 9000000, ${nonce}, ${hash(`out-${claim}-${nonce}`)}, '0x00',
      ${options.status ?? "confirmed"}, ${options.final === false ? null : new Date()})`;
  await attempt(claim, nonce, hash(`out-${claim}-${nonce}`));
}

async function attempt(claim: string, nonce: number, tx: string) {
  await sql`
    insert into app.payout_attempts (tx_hash, claim_id, nonce, raw_tx, max_fee_per_gas,
      max_priority_fee_per_gas)
    values (${tx}, ${claim}, ${nonce}, '0x00', 1, 1)`;
}

async function incoming(
  tx: string,
  block: number,
  schema = "indexer_one",
  authorization: string | null = null,
) {
  await sql.unsafe(
    `insert into ${schema}.incoming_transfer values ($1, 0, $2, $3, 0, 0, $4, $5, 10000000, $6)`,
    [tx, block, hash("block"), PAYER, WALLET, authorization],
  );
}

async function outgoing(tx: string, block: number, schema = "indexer_one") {
  await sql.unsafe(
    `insert into ${schema}.outgoing_transfer values ($1, 0, $2, $3, 0, 0, $4, $5, 9000000)`,
    [tx, block, hash("block"), WALLET, PAYER],
  );
}

/** A reorg above the finalized block took the transfer away. */
async function reorgedAway(table: "incoming_transfer" | "outgoing_transfer", tx: string) {
  await sql.unsafe(`delete from indexer_one.${table} where tx_hash = $1`, [tx]);
}

/** The attention check's worker, run until it has caught up (or moves no mark), a few rows a step. */
async function checkThrough(depth = DEPTH) {
  for (let step = 0; step < 100; step++) {
    const { caughtUp, moved } = await checkAttentionThrough(sql, depth, { batchSize: 2 });
    if (caughtUp || !moved) return;
  }
  throw new Error("the attention check did not catch up");
}

async function marks(depth = DEPTH) {
  return readAttentionMarks(sql, depth, await readIndexerTables(sql));
}

/**
 * The counts, which must be those of the queries that read every row before there were marks
 * (test/support/attentionAsFirstRead.ts), and so must doctor's read of every row.
 */
async function counts(depth = DEPTH) {
  const [marked, both, reference] = await Promise.all([
    readAttention(sql, depth),
    readAttentionBothWays(sql, depth),
    readAttentionAsFirstRead(sql, depth),
  ]);
  expect(marked).toEqual(reference);
  expect(both).toEqual({ marked: reference, everyRow: reference });
  return marked;
}

async function held(reason: string) {
  const rows = await sql<{ key: string }[]>`
    select key from app.attention_held where reason = ${reason} order by key`;
  return rows.map((row) => row.key);
}

describe("the attention check's marks", () => {
  it("pass what is final and settled, and hold the rest", async () => {
    await paidOut({ claim: "clm_settled", nonce: 1 });
    await incoming(hash("pay-clm_settled"), 10);
    await outgoing(hash("out-clm_settled-1"), 11);
    // Its payout's transfer is above the finalized block: a reorg can still take it.
    await paidOut({ claim: "clm_recent", nonce: 2, paymentBlock: 48 });
    await incoming(hash("pay-clm_recent"), 48);
    await outgoing(hash("out-clm_recent-2"), 60);
    // Not final: passed only once a later payout is final, and then held.
    await paidOut({ claim: "clm_unfinal", nonce: 3, final: false });
    await paidOut({ claim: "clm_last", nonce: 4 });
    await incoming(hash("pay-clm_last"), 12);
    await outgoing(hash("out-clm_last-4"), 13);
    // Held for good beside the payouts: its key is no nonce, which letting go must not read as one.
    await outgoing(hash("foreign"), 14);
    await checkThrough();

    expect(await marks()).toEqual({
      transfersThrough: { block: String(FINALIZED), log: 2_147_483_647 },
      payoutsThrough: "4",
      paymentsThrough: "4",
    });
    expect(await held("payout_missing_on_chain")).toEqual(["2", "3"]);
    // clm_recent's payment is at block 48, above 50 less CONFIRMATIONS: not at depth for good.
    expect(await held("payout_without_payment")).toEqual(["2", "3"]);
    expect(await held("payout_wallet_foreign_transfer")).toEqual([`${hash("foreign")}:0`]);
    expect(await counts()).toMatchObject({
      payout_wallet_foreign_transfer: 1,
      claim_paid_twice: 0,
      payout_missing_on_chain: 0,
      payout_without_payment: 1,
    });
    // Once final and settled, a held payout is let go.
    await checkpoint(LATEST + 30, FINALIZED + 30);
    await checkThrough();
    expect(await held("payout_missing_on_chain")).toEqual(["3"]);
    expect(await held("payout_without_payment")).toEqual(["3"]);
    expect(await held("payout_wallet_foreign_transfer")).toEqual([`${hash("foreign")}:0`]);
  });

  it("a step that moves no mark is no progress: the worker waits for its interval", async () => {
    // Payouts after the mark, none final yet: a batch of two has none to pass through.
    await paidOut({ claim: "clm_q", nonce: 1, final: false });
    await paidOut({ claim: "clm_r", nonce: 2, final: false });
    await paidOut({ claim: "clm_s", nonce: 3, final: false });
    const deps = { sql, config: { chain: DEPTH } } as unknown as Pick<
      ServiceDeps,
      "sql" | "config"
    >;
    const worker = createAttentionCheckWorker(deps, { batchSize: 2 });
    expect(await worker.tick()).toBe(true);
    expect(await checkAttentionThrough(sql, DEPTH, { batchSize: 2 })).toEqual({
      caughtUp: false,
      moved: false,
    });
    expect(await worker.tick()).toBe(false);
  });
});

describe("a row that needs attention after the marks have passed it", () => {
  it("a foreign transfer from the payout wallet, before the mark and after it", async () => {
    await paidOut({ claim: "clm_a", nonce: 1 });
    await incoming(hash("pay-clm_a"), 10);
    await outgoing(hash("out-clm_a-1"), 11);
    await outgoing(hash("foreign-1"), 12);
    await checkThrough();
    expect(await held("payout_wallet_foreign_transfer")).toEqual([`${hash("foreign-1")}:0`]);
    expect((await counts()).payout_wallet_foreign_transfer).toBe(1);

    await outgoing(hash("foreign-2"), FINALIZED + 5);
    expect((await counts()).payout_wallet_foreign_transfer).toBe(2);
  });

  it("a claim's second transfer: after the mark, and both before it", async () => {
    await paidOut({ claim: "clm_b", nonce: 1 });
    await incoming(hash("pay-clm_b"), 10);
    await outgoing(hash("out-clm_b-1"), 11);
    await paidOut({ claim: "clm_c", nonce: 2 });
    await incoming(hash("pay-clm_c"), 10);
    await outgoing(hash("out-clm_c-2"), 12);
    await attempt("clm_c", 2, hash("replacement-clm_c"));
    await outgoing(hash("replacement-clm_c"), 13);
    await checkThrough();
    expect(await held("claim_paid_twice")).toEqual(["clm_c"]);
    expect((await counts()).claim_paid_twice).toBe(1);

    // Its payout abandoned and re-issued, the old bytes mined after all: the re-issued one is
    // mined after the mark.
    await sql`update app.payouts set status = 'abandoned' where nonce = 1`;
    await sql`
      insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status)
      values ('clm_b', ${PAYER}, 9000000, 3, ${hash("reissued-clm_b")}, '0x00', 'confirmed')`;
    await attempt("clm_b", 3, hash("reissued-clm_b"));
    await outgoing(hash("reissued-clm_b"), FINALIZED + 2);
    expect((await counts()).claim_paid_twice).toBe(2);
  });

  it("a final payout held behind the mark, and one above it, that a reorg takes away", async () => {
    await paidOut({ claim: "clm_d", nonce: 1 });
    await incoming(hash("pay-clm_d"), 10);
    await outgoing(hash("out-clm_d-1"), FINALIZED + 1);
    await paidOut({ claim: "clm_e", nonce: 2, final: false });
    await paidOut({ claim: "clm_f", nonce: 3 });
    await incoming(hash("pay-clm_f"), 10);
    await outgoing(hash("out-clm_f-3"), 20);
    await checkThrough();
    expect(await held("payout_missing_on_chain")).toEqual(["1", "2"]);
    expect((await counts()).payout_missing_on_chain).toBe(0);

    await reorgedAway("outgoing_transfer", hash("out-clm_d-1"));
    // clm_e's payout became final, and its transfer is gone too.
    await sql`update app.payouts set final_at = now() where nonce = 2`;
    // And a payout the marks have not reached.
    await paidOut({ claim: "clm_g", nonce: 4 });
    expect((await counts()).payout_missing_on_chain).toBe(3);
  });

  it("a payment a reorg takes away, and one recorded late, after its payout was passed", async () => {
    await paidOut({ claim: "clm_h", nonce: 1, paymentBlock: FINALIZED + 2 });
    await incoming(hash("pay-clm_h"), FINALIZED + 2);
    await outgoing(hash("out-clm_h-1"), 20);
    // A settle-and-pay payout is signed before its payment is recorded.
    await paidOut({ claim: "clm_i", nonce: 2 });
    await sql`delete from app.payments where claim_id = 'clm_i'`;
    await outgoing(hash("out-clm_i-2"), 21);
    await checkThrough();
    expect(await held("payout_without_payment")).toEqual(["1", "2"]);
    expect((await counts()).payout_without_payment).toBe(0);

    await reorgedAway("incoming_transfer", hash("pay-clm_h"));
    await sql`
      insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash,
        from_address, value, matched_by)
      values (${hash("late")}, 0, 'clm_i', 30, ${hash("block")}, ${PAYER}, 10000000, 'sender')`;
    expect((await counts()).payout_without_payment).toBe(2);
  });
});

describe("marks that no longer hold", () => {
  it("are not used after a re-index into another schema", async () => {
    await paidOut({ claim: "clm_j", nonce: 1 });
    await incoming(hash("pay-clm_j"), 10);
    await outgoing(hash("out-clm_j-1"), 11);
    await checkThrough();
    // The new schema's indexer started later: it holds neither transfer.
    await indexer("indexer_two");
    await checkpoint(LATEST, FINALIZED, "indexer_two");
    expect(await marks()).toEqual(NOTHING_CHECKED);
    expect(await counts()).toMatchObject({ payout_missing_on_chain: 1, payout_without_payment: 1 });
    await checkThrough();
    expect(await held("payout_missing_on_chain")).toEqual(["1"]);
    expect(await counts()).toMatchObject({ payout_missing_on_chain: 1, payout_without_payment: 1 });
  });

  it("are not used after a re-index into the same schema, dropped and made again", async () => {
    await paidOut({ claim: "clm_l", nonce: 1 });
    await incoming(hash("pay-clm_l"), 10);
    await outgoing(hash("out-clm_l-1"), 11);
    await checkThrough();
    expect((await marks()).payoutsThrough).toBe("1");
    // A reorg deeper than Ponder's finality: the schema is dropped and the chain indexed again
    // into one of the same name, where the payout's transfer is no more.
    await sql`drop schema indexer_one cascade`;
    await indexer("indexer_one");
    await checkpoint(LATEST, FINALIZED);
    await incoming(hash("pay-clm_l"), 10);
    expect(await marks()).toEqual(NOTHING_CHECKED);
    expect((await counts()).payout_missing_on_chain).toBe(1);
    await checkThrough();
    expect(await held("payout_missing_on_chain")).toEqual(["1"]);
    expect((await counts()).payout_missing_on_chain).toBe(1);
  });

  it("start again for payments alone on another CONFIRMATIONS", async () => {
    for (const [index, claim] of ["clm_m", "clm_n", "clm_o"].entries()) {
      await paidOut({ claim, nonce: index + 1 });
      await incoming(hash(`pay-${claim}`), 10);
      await outgoing(hash(`out-${claim}-${index + 1}`), 11 + index);
    }
    await checkThrough();
    const before = await marks();
    expect(before.paymentsThrough).toBe("3");
    const other = { ...DEPTH, confirmations: DEPTH.confirmations + 2 };
    await checkAttentionThrough(sql, other, { batchSize: 2 });
    expect(await marks(other)).toEqual({ ...before, paymentsThrough: "2" });
    await checkThrough(other);
    expect(await marks(other)).toEqual(before);
    expect(await counts(other)).toMatchObject({ payout_without_payment: 0 });
  });

  it("are not used for payments at another CONFIRMATIONS", async () => {
    await paidOut({ claim: "clm_k", nonce: 1, paymentBlock: FINALIZED - 4 });
    await incoming(hash("pay-clm_k"), FINALIZED - 4);
    await outgoing(hash("out-clm_k-1"), 11);
    // An x402 payment recorded at block 10, whose settlement a reorg mined again at FINALIZED - 4
    // (the same authorization in another transaction): at depth for good at DEPTH, not at more.
    await paidOut({ claim: "clm_x", nonce: 2 });
    await sql`
      update app.payments set matched_by = 'x402', verified_at = now(),
        authorization_nonce = ${hash("authorization")}
      where claim_id = 'clm_x'`;
    await incoming(hash("pay-clm_x-again"), FINALIZED - 4, "indexer_one", hash("authorization"));
    await outgoing(hash("out-clm_x-2"), 12);
    await checkThrough();
    expect(await held("payout_without_payment")).toEqual([]);
    const deeper = { ...DEPTH, confirmations: LATEST - FINALIZED + 10 };
    expect((await marks(deeper)).paymentsThrough).toBe(NOTHING_CHECKED.paymentsThrough);
    // clm_k's transfer is no longer at depth for a read with more confirmations, its payment
    // neither; clm_x's payment is, its transfer is not.
    expect((await counts(deeper)).payout_without_payment).toBe(1);
  });
});

/**
 * Runs `read` while Ponder re-points the `chain` views at indexer_two, as its create_views does
 * (one transaction): `read` waits on `blocked` (a table a later statement of it reads) until the
 * re-pointing has begun, and both must finish, neither failing (a deadlock ends one of them).
 */
async function whileRepointed<T>(blocked: string, read: () => Promise<T>): Promise<T> {
  const blocker = connectDatabase(database.url, { max: 1 });
  const ponder = connectDatabase(database.url, { max: 1 });
  const lockWaits = async () => {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_locks where not granted`;
    return row?.n ?? 0;
  };
  try {
    const lock = await holdTableLock(blocker, blocked);
    const reading = read();
    await waitFor(async () => ((await lockWaits()) >= 1 ? true : undefined), {
      what: `the read to wait for ${blocked}`,
    });
    let repointed = false;
    const repointing = ponder
      .begin(async (tx) => {
        for (const table of ["incoming_transfer", "outgoing_transfer", "_ponder_checkpoint"]) {
          await tx.unsafe(`drop view if exists chain.${table}`);
          await tx.unsafe(`create view chain.${table} as select * from indexer_two.${table}`);
        }
      })
      .then(() => {
        repointed = true;
      });
    await waitFor(async () => (repointed || (await lockWaits()) >= 2 ? true : undefined), {
      what: "the views re-pointed, or waiting",
    });
    await lock.release();
    const [result] = await Promise.all([reading, repointing]);
    return result;
  } finally {
    await blocker.end();
    await ponder.end();
  }
}

describe("a re-index while the counts are read", () => {
  /**
   * indexer_one: a foreign transfer held behind the marks. indexer_two, a re-index started later:
   * neither the payout's transfer nor the foreign one.
   */
  async function twoIndexes() {
    await paidOut({ claim: "clm_p", nonce: 1 });
    await incoming(hash("pay-clm_p"), 10);
    await outgoing(hash("out-clm_p-1"), 11);
    await outgoing(hash("foreign-p"), 12);
    await indexerTables("indexer_two");
    await checkpoint(LATEST, FINALIZED, "indexer_two");
    await incoming(hash("pay-clm_p"), 10, "indexer_two");
  }

  it("the counts read the index they began on; Ponder's re-pointing of the views waits", async () => {
    await twoIndexes();
    await checkThrough();
    const before = await counts();
    expect(before).toMatchObject({ payout_wallet_foreign_transfer: 1, payout_missing_on_chain: 0 });
    // The counts' first statement after the marks reads app.x402_payments.
    expect(await whileRepointed("app.x402_payments", () => readAttention(sql, DEPTH))).toEqual(
      before,
    );
    expect(await counts()).toMatchObject({
      payout_wallet_foreign_transfer: 0,
      payout_missing_on_chain: 1,
    });
  });

  it("health's read gives up in PostgreSQL at its timeout, so it never leaves the views pinned", async () => {
    await twoIndexes();
    await checkThrough();
    // A read stuck after pinning the views (its first count waits on app.x402_payments), as a
    // slow read is once health has stopped waiting: the views must be let go at the timeout,
    // or Ponder's re-pointing, and the matcher's reads behind it, would wait for it.
    const blocker = connectDatabase(database.url, { max: 1 });
    let lock: Awaited<ReturnType<typeof holdTableLock>> | undefined;
    try {
      lock = await holdTableLock(blocker, "app.x402_payments");
      const error = await readAttention(sql, DEPTH, { timeoutMs: 300 }).catch((e) => e);
      // Cancelled by its statement or its lock timeout, whichever PostgreSQL meets first.
      expect(["57014", "55P03"]).toContain(error?.code);
      const [held] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_locks l
        join pg_class c on c.oid = l.relation join pg_namespace ns on ns.oid = c.relnamespace
        where ns.nspname = 'chain' and l.pid <> pg_backend_pid()`;
      expect(held?.n).toBe(0);
    } finally {
      await lock?.release();
      await blocker.end();
    }
  });

  it("a step of the attention check passes the index it began on; the re-pointing waits", async () => {
    await twoIndexes();
    // The step reads its mark (app.attention_checked) after the checkpoint, before the transfers.
    await whileRepointed("app.attention_checked", () =>
      checkAttentionThrough(sql, DEPTH, { batchSize: 2 }),
    );
    expect(await marks()).toEqual(NOTHING_CHECKED);
    expect(await counts()).toMatchObject({
      payout_wallet_foreign_transfer: 0,
      payout_missing_on_chain: 1,
    });
    await checkThrough();
    expect(await counts()).toMatchObject({
      payout_wallet_foreign_transfer: 0,
      payout_missing_on_chain: 1,
    });
  });
});
