import { readIndexerSchema } from "../../api/chain/indexerSchema.ts";
import type { Database, Sql } from "../../api/db/connect.ts";
import { countRows } from "../../api/db/rowCounts.ts";

/**
 * A year of traffic written straight into the database (BENCHMARKS.md#a-year-of-traffic): set-based
 * SQL with generate_series, never through the API. At `scale` 1: 10,000,000 claims, one in ten
 * completed (with its payment, payout, payout attempt, receipt, the x402 record of an x402 claim
 * and the indexer's incoming and outgoing transfers), the other nine expired unpaid (those of the
 * last 7 days still open), 100,000 unmatched transfers, and the rows that age out as the service
 * keeps them at steady state: amount reservations (variant A: claims of the last 37 days), inbound
 * mail (MAIL_RETENTION_DAYS, 30), A2A tasks (7 days), rate-limit windows, and the outbox, kept.
 *
 * Shapes follow rows the service wrote: every long text column takes its length from the real
 * rows of the same run (the empty database's seeding: x402 payouts paid with the official client,
 * claims created over HTTP), filled with hex that does not compress, as signatures and hashes do
 * not; an x402 record's signed header and settlement answer are the real rows' own, in turn. `compareWithRealRows` reports the average row width of each table, real against written.
 *
 * The chain's rows are dense: Anvil mines about 17 empty blocks a second, so a year of Base's
 * blocks (15.7 million) cannot exist on the devnet. The year's transfers share the blocks below
 * the matcher's cursor (`blocks`, with the devnet's own hashes), many to a block, with a year's
 * timestamps. Filled payouts take negative nonces: the signer's next nonce is the highest on record
 * plus one (api/payouts/signNewPayouts.ts), and the devnet's payout wallet has sent only the
 * seeding's. Rows are written in time order, as the service writes them, so that a day's claims,
 * payments and payouts share pages as they would (ordered by claim id instead, a page of the
 * ledger read twenty pages of each table). Rows are written with triggers and foreign keys off
 * (session_replication_role replica), so Ponder's reorg triggers record nothing, and secondary
 * indexes are dropped and built again after the load (the same definitions, from pg_indexes).
 */
export interface YearShape {
  claims: number;
  completed: number;
  unmatched: number;
}

export function yearShape(scale: number): YearShape {
  const claims = Math.max(1000, Math.round(10_000_000 * scale));
  return {
    claims,
    completed: Math.floor(claims / 10),
    unmatched: Math.max(100, Math.round(100_000 * scale)),
  };
}

/** The tables filled here, the service's and the indexer's (schema resolved at run time). */
const APP_TABLES = [
  "claims",
  "payments",
  "payouts",
  "payout_attempts",
  "receipts",
  "x402_payments",
  "unmatched_transfers",
  "amount_reservations",
  "outbox",
  "mail_messages",
  "a2a_tasks",
  "rate_limits",
  "ledger_days",
  "ledger_day_payees",
  "ledger_payees",
  "events",
];

/** The schema of Ponder's tables behind the `chain` views. */
export async function indexerSchema(sql: Sql): Promise<string> {
  const schema = await readIndexerSchema(sql);
  if (!schema)
    throw new Error("no indexer table behind chain.incoming_transfer (is Ponder ready?)");
  return schema;
}

/** Average widths of the real rows, to size the written ones (fallbacks for a column no real row has yet). */
async function realLengths(sql: Sql) {
  const [row] = await sql<Record<string, number | null>[]>`
    select
      (select avg(length(message))::int from app.receipts) as receipt_message,
      (select avg(length(a.raw_tx))::int from app.payout_attempts a
        join app.claims c on c.id = a.claim_id where c.flow = 'x402') as raw_tx,
      (select avg(length(a.raw_tx))::int from app.payout_attempts a
        join app.claims c on c.id = a.claim_id where c.flow <> 'x402') as raw_tx_plain,
      (select avg(length(payment_response))::int from app.x402_payments) as payment_response,
      (select avg(length(payment_header))::int from app.x402_payments) as payment_header,
      (select avg(length(payload_digest))::int from app.x402_payments) as payload_digest,
      (select avg(length(request_fingerprint))::int from app.x402_payments) as request_fingerprint,
      (select avg(length(client_key))::int from app.claims where client_key is not null) as client_key`;
  const pick = (value: number | null | undefined, fallback: number) => value ?? fallback;
  return {
    receiptMessage: pick(row?.receipt_message, 480),
    // An x402 payout's transaction carries its settlement too (x402 in one block); a plain
    // payout's is a transfer alone.
    rawTx: pick(row?.raw_tx, 1300),
    rawTxPlain: pick(row?.raw_tx_plain, 236),
    paymentResponse: pick(row?.payment_response, 260),
    paymentHeader: pick(row?.payment_header, 1100),
    payloadDigest: pick(row?.payload_digest, 64),
    requestFingerprint: pick(row?.request_fingerprint, 64),
    clientKey: pick(row?.client_key, 64),
  };
}

export interface FillReport {
  shape: YearShape;
  steps: { step: string; seconds: number }[];
  seconds: number;
}

/**
 * Writes the year. `blocks`: the devnet's blocks the year's transfers may sit in (number and hash),
 * all below the matcher's cursor, so nothing written is new to the matcher.
 */
export async function fillYear(
  sql: Database,
  options: {
    scale: number;
    blocks: { number: bigint; hash: string }[];
    log?: (line: string) => void;
  },
): Promise<FillReport> {
  const shape = yearShape(options.scale);
  const log = options.log ?? (() => {});
  const steps: FillReport["steps"] = [];
  const started = Date.now();
  const schema = await indexerSchema(sql);
  const lengths = await realLengths(sql);
  const step = async (name: string, run: () => Promise<unknown>) => {
    const at = Date.now();
    await run();
    const seconds = (Date.now() - at) / 1000;
    steps.push({ step: name, seconds });
    log(`  ${name}: ${seconds.toFixed(1)} s`);
  };

  await sql.begin(async (transaction) => {
    await transaction.unsafe("set local session_replication_role = replica");
    await transaction.unsafe("set local work_mem = '512MB'");
    await transaction.unsafe("set local maintenance_work_mem = '1GB'");
    const tx = transaction as unknown as Sql;

    // Parameters and the blocks, as tables the statements below read.
    await step("parameters", async () => {
      await tx.unsafe(`
        create temporary table year_shape on commit drop as
        select ${shape.claims}::int8 as n, ${shape.completed}::int8 as c, ${shape.unmatched}::int8 as u,
          now() as t_end, now() - interval '365 days' as t_start,
          ${lengths.receiptMessage}::int as receipt_len, ${lengths.rawTx}::int as raw_len, ${lengths.rawTxPlain}::int as raw_plain_len,
          ${lengths.paymentResponse}::int as response_len, ${lengths.paymentHeader}::int as header_len,
          ${lengths.payloadDigest}::int as digest_len, ${lengths.requestFingerprint}::int as fingerprint_len,
          ${lengths.clientKey}::int as client_key_len`);
      await tx.unsafe(
        "create temporary table year_blocks (ordinal int primary key, number int8, hash text) on commit drop",
      );
      await tx`insert into year_blocks ${tx(
        options.blocks.map((block, index) => ({
          ordinal: index,
          number: String(block.number),
          hash: block.hash,
        })),
      )}`;
      // Hex that does not compress (as signatures, hashes and base64 do not), `len` characters.
      await tx.unsafe(`
        create function pg_temp.filler(seed text, len int) returns text language sql immutable as $$
          select substr(string_agg(md5(seed || k), '' order by k), 1, greatest(len, 0))
          from generate_series(1, (greatest(len, 0) + 31) / 32) k $$`);
      await tx.unsafe(`
        create function pg_temp.hex(seed text, len int) returns text language sql immutable as $$
          select '0x' || pg_temp.filler(seed, len) $$`);
      await tx.unsafe(`
        create function pg_temp.claim_id(i int8) returns text language sql immutable as $$
          select 'clm_' || translate(encode(decode(md5('claim' || i), 'hex'), 'base64'), '+/=', '-_') $$`);
    });

    // Secondary indexes out of the way of the load; built again at the end.
    const tables = [
      ...APP_TABLES.map((table) => `app.${table}`),
      `${schema}.incoming_transfer`,
      `${schema}.outgoing_transfer`,
    ];
    const indexes = await tx<{ name: string; definition: string }[]>`
      select format('%I.%I', i.schemaname, i.indexname) as name, i.indexdef as definition
      from pg_indexes i
      where format('%s.%s', i.schemaname, i.tablename) = any(${tables})
        and not exists (select 1 from pg_constraint c where c.conindid = format('%I.%I', i.schemaname, i.indexname)::regclass)`;
    await step(`drop ${indexes.length} secondary indexes`, async () => {
      for (const index of indexes) await tx.unsafe(`drop index ${index.name}`);
    });

    // Claim i (1..n) is created at t_start + i/n of the year. Every tenth completes, two minutes
    // after creation; the rest expire 7 days (and the 15-minute grace) after, or are still open.
    // Of the completed (k = i/10): k%20 < 10 x402, 10-15 claim flow by amount, 16-17 by sender,
    // 18 mail by amount, 19 claim flow by tx hash. Of the unpaid, one in twenty came by mail.
    await step("claims", () =>
      tx.unsafe(`
        insert into app.claims (id, flow, payout_address, email, agent_name, amount_due, tx_hash,
          status, created_at, expires_at, paid_at, completed_at, failure_reason, tx_hash_signed, client_key)
        select pg_temp.claim_id(i),
          case when i % 10 = 0 then (case when (i / 10) % 20 < 10 then 'x402' when (i / 10) % 20 = 18 then 'mail' else 'claim' end)
               when i % 20 = 1 then 'mail' else 'claim' end,
          '0x' || substr(md5('payout' || (i % (n / 3))), 1, 32) || substr(md5('payout2' || (i % (n / 3))), 1, 8),
          case when (i % 10 = 0 and ((i / 10) % 5 = 0 or (i / 10) % 20 = 18)) or i % 20 = 1 or i % 10 = 3 then 'earner' || (i % (n / 3)) || '@example.com' end,
          case when i % 10 < 6 then 'agent-' || (i % 5000) end,
          case when i % 10 = 0 and (i / 10) % 20 in (10, 11, 12, 13, 14, 15, 18) then 10000000 + 1 + (i * 7919) % 999999
               when i % 10 = 0 then 10000000 + 1 + (i * 7919) % 999999
               else 10000000 + 1 + (i * 7919) % 999999 end,
          case when i % 10 = 0 and (i / 10) % 20 = 19 then '0x' || md5('pay' || i) || md5('pay2' || i) end,
          case when i % 10 = 0 then 'completed'
               when created + interval '7 days 15 minutes' < t_end then 'expired' else 'awaiting_payment' end,
          created, created + interval '7 days',
          case when i % 10 = 0 then created + interval '2 minutes' end,
          case when i % 10 = 0 then created + interval '2 minutes 10 seconds' end,
          null, false,
          case when i % 10 <> 0 or (i / 10) % 20 >= 10 then substr(md5('client' || (i % (n / 3))) || md5('client2' || (i % (n / 3))), 1, client_key_len) end
        from year_shape, generate_series(1, n) i,
          lateral (select t_start + (t_end - t_start) * (i::float8 / n) as created) t
        order by i`),
    );

    // Where completed claim i's transfers sit: the blocks in order of time, many to a block.
    await step("completed claims' positions", async () => {
      await tx.unsafe(`
        create temporary table year_completed on commit drop as
        select i, pg_temp.claim_id(i) as claim_id, c.payout_address, c.amount_due, c.flow, c.paid_at, c.completed_at,
          b.number as block_number, b.hash as block_hash,
          case when (i / 10) % 20 < 10 then 'x402' when (i / 10) % 20 in (10, 11, 12, 13, 14, 15, 18) then 'amount'
               when (i / 10) % 20 in (16, 17) then 'sender' else 'tx_hash' end as matched_by,
          '0x' || md5('pay' || i) || md5('pay2' || i) as payment_tx,
          '0x' || md5('out' || i) || md5('out2' || i) as payout_tx,
          -i / 10 as nonce
        from year_shape cross join generate_series(10, n, 10) i
        join app.claims c on c.id = pg_temp.claim_id(i)
        join year_blocks b on b.ordinal = ((i::float8 / n) * (select count(*) from year_blocks))::int
          % (select count(*) from year_blocks)
        order by i`);
    });

    await step("payments", () =>
      tx.unsafe(`
        insert into app.payments (tx_hash, log_index, claim_id, block_number, block_hash, from_address, value,
          matched_by, matched_at, transfer_ordinal, authorization_nonce, verified_at)
        select payment_tx, i::int, claim_id, block_number, block_hash,
          case when matched_by = 'sender' then payout_address
               else '0x' || substr(md5('payer' || i), 1, 32) || substr(md5('payer2' || i), 1, 8) end,
          case when matched_by = 'amount' then amount_due else 10000000 end,
          matched_by, paid_at, 1,
          case when matched_by = 'x402' then '0x' || md5('nonce' || i) || md5('nonce2' || i) end,
          paid_at + interval '6 seconds'
        from year_completed order by i`),
    );
    await step("payouts", () =>
      tx.unsafe(`
        insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status, broadcasts,
          created_at, last_broadcast_at, confirmed_at, block_number, last_error, block_hash, final_at)
        select claim_id, payout_address, 1000000, nonce, payout_tx, pg_temp.hex('raw' || i, (case when matched_by = 'x402' then raw_len else raw_plain_len end) - 2), 'confirmed', 1,
          paid_at + interval '1 second', paid_at + interval '1 second', completed_at, block_number, null, block_hash,
          completed_at + interval '20 seconds'
        from year_completed, year_shape order by i`),
    );
    await step("payout attempts", () =>
      tx.unsafe(`
        insert into app.payout_attempts (tx_hash, claim_id, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, created_at)
        select payout_tx, claim_id, nonce, pg_temp.hex('raw' || i, (case when matched_by = 'x402' then raw_len else raw_plain_len end) - 2), 12000000 + i % 1000, 1000000, paid_at + interval '1 second'
        from year_completed, year_shape order by i`),
    );
    await step("receipts", () =>
      tx.unsafe(`
        insert into app.receipts (claim_id, message, signature, signer, issued_at)
        select claim_id,
          rpad('Service: pay-and-earn' || chr(10) || 'Claim: ' || claim_id || chr(10) || 'Payment tx: ' || payment_tx
            || chr(10) || 'Payout tx: ' || payout_tx || chr(10), receipt_len, pg_temp.filler('message' || i, 128)),
          pg_temp.hex('signature' || i, 130), '0x' || md5('signer') || substr(md5('signer2'), 1, 8), completed_at
        from year_completed, year_shape order by i`),
    );
    await step("x402 records", () =>
      tx.unsafe(`
        insert into app.x402_payments (payer, nonce, claim_id, payload_digest, status, settlement_tx, failure_reason,
          payment_response, created_at, updated_at, payment_header, payment_identifier, request_fingerprint, authorized_value)
        select '0x' || substr(md5('payer' || i), 1, 32) || substr(md5('payer2' || i), 1, 8),
          '0x' || md5('nonce' || i) || md5('nonce2' || i), claim_id, pg_temp.filler('digest' || i, digest_len), 'settled',
          payment_tx, null, coalesce(r.payment_response, pg_temp.filler('response' || i, response_len)),
          paid_at, paid_at + interval '3 seconds',
          coalesce(r.payment_header, pg_temp.filler('header' || i, header_len)), null,
          pg_temp.filler('fingerprint' || i, fingerprint_len), 10000000
        from year_completed cross join year_shape
        left join (
          select row_number() over (order by claim_id) - 1 as ordinal, count(*) over () as real_rows,
            payment_response, payment_header
          from app.x402_payments) r on r.ordinal = i % r.real_rows
        where matched_by = 'x402'
        order by i`),
    );
    await step("indexed incoming transfers (payments)", () =>
      tx.unsafe(`
        insert into ${schema}.incoming_transfer (tx_hash, log_index, block_number, block_hash, block_timestamp,
          transaction_index, "from", "to", value, authorization_nonce)
        select p.tx_hash, p.log_index, p.block_number, p.block_hash, extract(epoch from p.matched_at)::int8, 0,
          p.from_address, (select "to" from ${schema}.incoming_transfer limit 1), p.value, p.authorization_nonce
        from app.payments p join year_completed y on y.payment_tx = p.tx_hash
        order by y.i`),
    );
    await step("indexed outgoing transfers (payouts)", () =>
      tx.unsafe(`
        insert into ${schema}.outgoing_transfer (tx_hash, log_index, block_number, block_hash, block_timestamp,
          transaction_index, "from", "to", value)
        select payout_tx, i::int, block_number, block_hash, extract(epoch from completed_at)::int8, 1,
          (select "from" from ${schema}.outgoing_transfer limit 1), payout_address, 1000000
        from year_completed order by i`),
    );
    // Unmatched: 60% below the price, 25% late payments of expired claims, 15% matching nothing.
    await step("unmatched transfers", async () => {
      await tx.unsafe(`
        create temporary table year_unmatched on commit drop as
        select j as u, '0x' || md5('unmatched' || j) || md5('unmatched2' || j) as tx_hash, (n + j)::int as log_index,
          b.number as block_number, b.hash as block_hash,
          '0x' || substr(md5('stranger' || j), 1, 32) || substr(md5('stranger2' || j), 1, 8) as from_address,
          case when j % 20 < 12 then 1000000 + (j % 8000000) else 10000000 + 1 + (j * 104729) % 999999 end as value,
          case when j % 20 < 12 then 'below_price' when j % 20 < 17 then 'claim_expired' else 'no_matching_claim' end as reason,
          case when j % 20 between 12 and 16 then pg_temp.claim_id(((j * 10) % n) + 1) end as claim_id,
          t_start + (t_end - t_start) * (j::float8 / year_shape.u) as decided_at
        from year_shape cross join generate_series(1, year_shape.u) series(j)
        join year_blocks b on b.ordinal = j % (select count(*) from year_blocks)`);
      await tx.unsafe(`
        insert into app.unmatched_transfers (tx_hash, log_index, block_number, from_address, value, reason, claim_id, decided_at)
        select tx_hash, log_index, block_number, from_address, value, reason, claim_id, decided_at from year_unmatched`);
      await tx.unsafe(`
        insert into ${schema}.incoming_transfer (tx_hash, log_index, block_number, block_hash, block_timestamp,
          transaction_index, "from", "to", value, authorization_nonce)
        select tx_hash, log_index, block_number, block_hash, extract(epoch from decided_at)::int8, 0, from_address,
          (select "to" from ${schema}.incoming_transfer limit 1), value, null
        from year_unmatched`);
    });
    // Variant A: each claim of the last 37 days (7 open and 30 held, AMOUNT_HOLD_SECONDS) holds
    // its amount, as far as the space of 999,999 amounts goes (at 27,400 claims a day it is full).
    await step("amount reservations", () =>
      tx.unsafe(`
        insert into app.amount_reservations (amount, claim_id, held_until)
        select c.amount_due, c.id, c.expires_at + interval '30 days'
        from app.claims c, year_shape
        where c.created_at > t_end - interval '37 days' and c.id like 'clm_%' and c.flow <> 'x402'
        on conflict do nothing`),
    );
    // The outbox keeps every mail: the receipt mail of each completed claim with an email, the
    // instructions of each mail-flow claim.
    await step("outbox", () =>
      tx.unsafe(`
        insert into app.outbox (kind, claim_id, recipient, attempts, next_attempt_at, sent_at, created_at,
          idempotency_key, status, payload, message_id)
        select case when c.status = 'completed' then 'receipt_mail' else 'mail_instructions' end, c.id, c.email, 1,
          c.created_at, c.created_at + interval '3 seconds', c.created_at,
          (case when c.status = 'completed' then 'receipt_mail:' else 'mail_instructions:' end) || c.id, 'sent',
          '{}'::jsonb, '<' || md5(c.id) || '@pay-and-earn.example>'
        from app.claims c
        where c.email is not null and (c.status = 'completed' or c.flow = 'mail')`),
    );
    // Inbound mail of the last 30 days (MAIL_RETENTION_DAYS): acted on, only the header block kept.
    await step("inbound mail", () =>
      tx.unsafe(`
        insert into app.mail_messages (message_id, transport, received_at, raw, truncated, size_bytes, envelope_from,
          client_ip, client_helo, status, outcome, from_address, subject, claim_id, attempts, next_attempt_at, processed_at)
        select '<' || md5('inbound' || c.id) || '@mail.example>', 'smtp', c.created_at,
          convert_to(pg_temp.filler('raw' || c.id, 1400), 'UTF8'), false, 3200, c.email, '203.0.113.7', 'mail.example',
          'processed', 'claim_created', c.email, 'payout 0x' || substr(c.payout_address, 3, 8), c.id, 1, c.created_at,
          c.created_at + interval '1 second'
        from app.claims c, year_shape
        where c.flow = 'mail' and c.created_at > t_end - interval '30 days'`),
    );
    // A2A tasks: one claim in fifty came by A2A; tasks are kept 7 days after their last change.
    await step("a2a tasks", () =>
      tx.unsafe(`
        insert into app.a2a_tasks (id, context_id, claim_id, state, task, created_at, updated_at, client)
        select md5('task' || c.id)::uuid::text, md5('context' || c.id)::uuid::text, c.id,
          case when c.status = 'completed' then 'TASK_STATE_COMPLETED' else 'TASK_STATE_INPUT_REQUIRED' end,
          jsonb_build_object('id', md5('task' || c.id)::uuid::text, 'kind', 'task',
            'status', jsonb_build_object('state', 'input-required'),
            'history', jsonb_build_array(jsonb_build_object('text', pg_temp.filler('history' || c.id, 900)))),
          c.created_at, c.created_at, null
        from app.claims c, year_shape
        where c.created_at > t_end - interval '7 days' and hashtext(c.id) % 50 = 0`),
    );
    // Events of the last 30 days (EVENT_RETENTION_DAYS; older ones are pruned), all fanned out:
    // each claim's creation, its expiry or its payment, payout and completion, and each unmatched
    // transfer's notice, as the triggers of api/db/definitions/events.sql write them. Their
    // snapshots are the real events' own, in turn.
    await step("events", async () => {
      await tx.unsafe(`
        create temporary table year_snapshots on commit drop as
        select row_number() over (order by id) - 1 as ordinal, snapshot
        from app.events where claim_id is not null`);
      const [real] = await tx<
        { count: number }[]
      >`select count(*)::int as count from year_snapshots`;
      if (!real?.count)
        throw new Error("no real event to take snapshots from (was the seeding run?)");
      await tx.unsafe(`
        insert into app.events (type, claim_id, ordering_key, occurred_at, snapshot, fanned_out)
        select e.type, e.claim_id, coalesce(e.claim_id, e.ordering_key), e.at, r.snapshot, true
        from (
          select 'claim.created' as type, c.id as claim_id, null as ordering_key, c.created_at as at
          from app.claims c, year_shape where c.created_at > t_end - interval '30 days'
          union all
          select 'claim.expired', c.id, null, c.expires_at + interval '15 minutes'
          from app.claims c, year_shape
          where c.status = 'expired' and c.expires_at + interval '15 minutes' > t_end - interval '30 days'
          union all
          select kind, c.id, null, c.paid_at + offset_by
          from app.claims c cross join year_shape
          cross join (values ('claim.paid', interval '0 seconds'), ('claim.paying', interval '1 second'),
            ('claim.completed', interval '10 seconds')) k(kind, offset_by)
          where c.status = 'completed' and c.paid_at > t_end - interval '30 days'
          union all
          select 'payment.unmatched', u.claim_id, 'transfer:' || u.tx_hash || ':' || u.log_index, u.decided_at
          from year_unmatched u, year_shape where u.decided_at > t_end - interval '30 days'
        ) e
        join year_snapshots r on r.ordinal = (hashtext(coalesce(e.claim_id, e.ordering_key) || e.type)
          & 1023) % (select count(*) from year_snapshots)
        order by e.at`);
    });
    // Rate-limit windows of the last minute: a few thousand clients.
    await step("rate limits", () =>
      tx.unsafe(`
        insert into app.rate_limits (key, window_start, count)
        select (case when k % 3 = 0 then 'write:' else 'read:' end) || '198.51.' || (k / 256) % 256 || '.' || k % 256,
          now() - (k % 60) * interval '1 second', 1 + k % 40
        from generate_series(1, 5000) k
        on conflict do nothing`),
    );

    await step(`build ${indexes.length} secondary indexes`, async () => {
      for (const index of indexes) await tx.unsafe(index.definition);
    });
  });
  // The ledger's figures are kept by triggers (api/db/definitions/ledger_stats.sql), off for the
  // load: counted again by migration 0027's count, from its start.
  await step("ledger figures (migration 0027's count)", async () => {
    await forgetLedgerFigures(sql);
    await countLedgerFigures(sql, log);
  });
  // The scrape's counts are kept by triggers too (api/db/definitions/row_counts.sql): counted
  // again by migration 0032's count, which replaces whatever was kept.
  await step("the scrape's counts (migration 0032's count)", () => countRows(sql));
  await step("vacuum analyze", async () => {
    for (const table of [
      ...APP_TABLES.map((name) => `app.${name}`),
      `${schema}.incoming_transfer`,
      `${schema}.outgoing_transfer`,
    ]) {
      await sql.unsafe(`vacuum (analyze) ${table}`);
    }
  });
  return { shape, steps, seconds: (Date.now() - started) / 1000 };
}

/** Average stored width (bytes, pg_column_size of the row) of the real rows against the written ones. */
export async function compareWithRealRows(sql: Sql, realClaimIds: string[]) {
  const widths = await sql<{ table: string; real: number | null; written: number | null }[]>`
    select 'claims' as table,
      (select avg(pg_column_size(c.*))::int from app.claims c where id = any(${realClaimIds})) as real,
      (select avg(pg_column_size(c.*))::int from app.claims c where id <> all(${realClaimIds}) and c.status = 'completed' and c.flow = 'x402') as written
    union all select 'payments',
      (select avg(pg_column_size(p.*))::int from app.payments p where claim_id = any(${realClaimIds})),
      (select avg(pg_column_size(p.*))::int from app.payments p where claim_id <> all(${realClaimIds}))
    union all select 'payouts (x402)',
      (select avg(pg_column_size(p.*))::int from app.payouts p where claim_id = any(${realClaimIds})),
      (select avg(pg_column_size(p.*))::int from app.payouts p join app.claims c on c.id = p.claim_id
        where p.claim_id <> all(${realClaimIds}) and c.flow = 'x402')
    -- The written payouts have negative nonces; the real plain ones are bench:scale's loop's.
    union all select 'payouts (plain)',
      (select avg(pg_column_size(p.*))::int from app.payouts p join app.claims c on c.id = p.claim_id
        where c.flow <> 'x402' and p.nonce >= 0),
      (select avg(pg_column_size(p.*))::int from app.payouts p join app.claims c on c.id = p.claim_id
        where c.flow <> 'x402' and p.nonce < 0)
    union all select 'payout_attempts (x402)',
      (select avg(pg_column_size(p.*))::int from app.payout_attempts p where claim_id = any(${realClaimIds})),
      (select avg(pg_column_size(p.*))::int from app.payout_attempts p join app.claims c on c.id = p.claim_id
        where p.claim_id <> all(${realClaimIds}) and c.flow = 'x402')
    union all select 'receipts',
      (select avg(pg_column_size(r.*))::int from app.receipts r where claim_id = any(${realClaimIds})),
      (select avg(pg_column_size(r.*))::int from app.receipts r where claim_id <> all(${realClaimIds}))
    union all select 'x402_payments',
      (select avg(pg_column_size(x.*))::int from app.x402_payments x where claim_id = any(${realClaimIds})),
      (select avg(pg_column_size(x.*))::int from app.x402_payments x where claim_id <> all(${realClaimIds}))`;
  return widths;
}

/**
 * The ledger's figures and the count's cursor as migration 0027 finds them on a database that
 * had none: empty, nothing counted; for rows written with triggers off (the year, the count's
 * benchmark, the tests). The claims', payouts' and payments' writers wait for it, so none is
 * between its trigger's "already counted" and its move of the figures while they are emptied
 * (docs/operating.md#the-ledgers-count-migration-0027 gives the same transaction to operators).
 */
export async function forgetLedgerFigures(sql: Database): Promise<void> {
  await sql.begin(async (transaction) => {
    await transaction`
      lock table app.claims, app.payouts, app.payments in share row exclusive mode`;
    await transaction`update app.ledger_backfill
      set counted_to = null, finished_at = null, batches = 0, retries = 0, longest_batch_ms = 0`;
    // delete, not truncate: a reader's snapshot from before still sees the rows it should.
    await transaction`delete from app.ledger_days`;
    await transaction`delete from app.ledger_day_payees`;
    await transaction`delete from app.ledger_payees`;
    await transaction`update app.ledger_totals set unique_payout_addresses = 0`;
  });
}

/** Migration 0027's count, outside a transaction (it commits each batch), and what it says. */
export async function countLedgerFigures(
  sql: Sql,
  log: (line: string) => void,
): Promise<{ batches: number; retries: number; longestBatchMs: number }> {
  await sql`call app.count_ledger_figures()`;
  const [row] = await sql<{ batches: string; retries: string; longest_batch_ms: number }[]>`
    select batches::text, retries::text, longest_batch_ms from app.ledger_backfill`;
  const figures = {
    batches: Number(row?.batches ?? 0),
    retries: Number(row?.retries ?? 0),
    longestBatchMs: row?.longest_batch_ms ?? 0,
  };
  log(
    `    ${figures.batches} batches, ${figures.retries} gave way to a writer, longest ${figures.longestBatchMs.toFixed(1)} ms`,
  );
  return figures;
}
