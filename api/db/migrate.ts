import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout } from "node:timers/promises";
import type { Logger } from "../logger.ts";
import type { Database, Sql, Transaction } from "./connect.ts";
import { hasSqlState, SQL_STATE } from "./sqlState.ts";

/**
 * Where the service's schema comes from: the numbered migrations (tables, columns, indexes,
 * data: applied once each, never edited once landed) and the definitions (functions, views,
 * triggers: each defined once, in its current text, and applied again whenever that text changes).
 */
export interface SchemaSources {
  migrations: string;
  /** None for a migrations folder of its own (the migration runner's tests). */
  definitions?: string;
}

export const SERVICE_SCHEMA = {
  migrations: join(import.meta.dirname, "migrations"),
  definitions: join(import.meta.dirname, "definitions"),
} satisfies SchemaSources;

/** Any constant works; it only has to be the same in every process that migrates. */
const MIGRATION_LOCK = 7_242_001;

/**
 * A migration file whose first line is this runs outside a transaction, one statement at a time
 * (each ends with `;` at the end of its line), for `create index concurrently`, which cannot run
 * in one (docs/operating.md#migrations-at-size). It is recorded only once every statement has
 * run, so an interrupted one runs whole again on the next start: it must be safe to repeat, as
 * `drop index concurrently if exists` before the build is (a build that fails leaves its index
 * invalid).
 */
export const OUTSIDE_TRANSACTION = "--! no-transaction";

/** How often a process waiting for the migration lock asks for it again. */
const LOCK_POLL_MS = 100;

/**
 * How long applying the definitions waits for a table's lock before it gives way. Creating a
 * trigger takes SHARE ROW EXCLUSIVE on its table, which waits behind every transaction writing
 * it, and every write that comes after waits behind it in turn (an x402 settlement gives up at
 * 5 s): giving way after this long, and trying again, bounds how long writers can queue behind
 * it. It also breaks a cycle with writers that lock the tables in another order. Longer than
 * PostgreSQL's deadlock_timeout (1 s): only a waiter that has waited that long cancels an
 * autovacuum holding the table, which at a year's size may otherwise outlast every try.
 */
export const DEFINITIONS_LOCK_WAIT_MS = 1_200;
/** Tries before applying the definitions fails the start: about 20 s of busy tables in all. */
export const DEFINITIONS_ATTEMPTS = 12;

export interface Migration {
  id: number;
  name: string;
  sql: string;
  /** Applied outside a transaction (see OUTSIDE_TRANSACTION). */
  outsideTransaction: boolean;
}

/** A file of `api/db/definitions/`: `claim_creation.sql` is named `claim_creation`. */
export interface Definition {
  name: string;
  sql: string;
}

/**
 * A migration whose file no longer holds the text this database applied. The database keeps
 * what it applied; nothing re-applies the new text, so a change belongs in a new migration.
 */
export interface DriftedMigration {
  id: number;
  name: string;
  appliedChecksum: string;
  fileChecksum: string;
}

export interface MigrationRun {
  /** The migrations this call applied, in order. */
  applied: number[];
  /** Applied migrations whose file has changed since (see DriftedMigration). */
  drifted: DriftedMigration[];
  /** The definitions this call applied: new, or changed since the database last applied them. */
  defined: string[];
  /**
   * Applied migrations this code has no file for: a newer version migrated the database. Its
   * definitions are kept, never replaced by this older code's (docs/operating.md#schema-changes).
   */
  unknown: number[];
}

/** Numbered plain SQL files: `0001_claims.sql`, `0002_…`; the number is the order. */
export async function readMigrations(directory = SERVICE_SCHEMA.migrations): Promise<Migration[]> {
  const files = (await readdir(directory)).filter((file) => file.endsWith(".sql")).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
    if (!match?.[1] || !match[2])
      throw new Error(`Migration file name ${file} is not NNNN_name.sql`);
    const sql = await readFile(join(directory, file), "utf8");
    migrations.push({
      id: Number(match[1]),
      name: match[2],
      sql,
      outsideTransaction: isOutsideTransaction(sql),
    });
  }
  return migrations;
}

/**
 * SHA-256 of a migration's text. Line endings are made LF first, so a checkout with CRLF
 * (git's autocrlf on Windows) is not reported as a change.
 */
export function migrationChecksum(migration: Omit<Migration, "outsideTransaction">): string {
  return textChecksum(migration.sql);
}

/**
 * Earlier texts of landed migrations, by checksum, that differ from today's in SQL comments
 * only: their comments cited benchmark runs by number and now cite a BENCHMARKS.md section. A
 * database that applied such a text applied the same statements: it is not drifted, and its row
 * takes today's checksum on the next start. A new entry needs the same proof: the two texts
 * equal once their `--` comment lines are dropped.
 */
const COMMENT_ONLY_EDITS: Record<number, string> = {
  13: "7fa48e12272955453f419822ee54e25617b59974aa30e9f8430d8c54048c9636",
  14: "8354994aca8e4894903dbd8f952c97c2e03414175bb964c61c82eac167098be1",
  15: "d6d983234ccf2447bdd59393f06d7fc2007fd099bc7b8e5f09240d5954488e7b",
};

/** Whether a recorded checksum stands for the migration's statements as they are today. */
function sameStatements(migration: Migration, recorded: string): boolean {
  return recorded === migrationChecksum(migration) || recorded === COMMENT_ONLY_EDITS[migration.id];
}

function textChecksum(sql: string): string {
  return createHash("sha256").update(sql.replaceAll("\r\n", "\n")).digest("hex");
}

/** Plain SQL files named for what they define, applied in name order. */
export async function readDefinitions(
  directory = SERVICE_SCHEMA.definitions,
): Promise<Definition[]> {
  const files = (await readdir(directory)).filter((file) => file.endsWith(".sql")).sort();
  const definitions: Definition[] = [];
  for (const file of files) {
    const match = /^([a-z][a-z0-9_]*)\.sql$/.exec(file);
    if (!match?.[1]) throw new Error(`Definitions file name ${file} is not snake_case.sql`);
    definitions.push({ name: match[1], sql: await readFile(join(directory, file), "utf8") });
  }
  return definitions;
}

/**
 * Applies pending migrations, each in its own transaction (or outside one when its file says so:
 * OUTSIDE_TRANSACTION), then the definitions. Each first takes the migration lock and then
 * re-reads what is applied, so two processes starting at once apply each migration exactly once
 * (the second waits, then skips).
 *
 * Each applied migration's checksum is recorded, and an applied migration whose file has
 * changed since is reported in `drifted`, never applied again. A row from before checksums
 * were kept gets the file's checksum on the first run that sees it: the guard starts there.
 *
 * The definitions (`create or replace`) are applied together in one transaction, after the
 * migrations, under the same lock: those whose text the database has not applied yet (recorded
 * by checksum in app.schema_definitions). An unchanged definition is not applied again:
 * replacing a view locks it against every reader, and replacing a function makes every session
 * plan it again. A database that has migrations this code does not know keeps its definitions.
 */
export async function migrate(
  sql: Database,
  sources: SchemaSources = SERVICE_SCHEMA,
  options: { logger?: Pick<Logger, "warn"> } = {},
): Promise<MigrationRun> {
  const migrations = await readMigrations(sources.migrations);
  const definitions = sources.definitions ? await readDefinitions(sources.definitions) : [];
  await inMigrationLock(sql, async (transaction) => {
    await transaction`create schema if not exists app`;
    await transaction`
      create table if not exists app.schema_migrations (
        id integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`;
    // Kept since the guard against edited migrations; null on rows applied before it. Looked up
    // first: `alter table`, even one with nothing to add, waits for every reader of the table.
    const [hasChecksum] = await transaction`
      select 1 from information_schema.columns
      where table_schema = 'app' and table_name = 'schema_migrations' and column_name = 'checksum'`;
    if (!hasChecksum) {
      await transaction`alter table app.schema_migrations add column checksum text`;
    }
  });
  const applied: number[] = [];
  for (const migration of migrations) {
    const checksum = migrationChecksum(migration);
    if (migration.outsideTransaction) {
      if (await applyOutsideTransaction(sql, migration, migration.sql, checksum)) {
        applied.push(migration.id);
      }
      continue;
    }
    await inMigrationLock(sql, async (transaction) => {
      if (await isApplied(transaction, migration, checksum)) return;
      await transaction`
        insert into app.schema_migrations (id, name, checksum)
        values (${migration.id}, ${migration.name}, ${checksum})`;
      await transaction.unsafe(migration.sql);
      applied.push(migration.id);
    });
  }
  const { defined, unknown } = await define(sql, definitions, migrations, options.logger);
  return {
    applied,
    drifted: driftedMigrations(await readAppliedMigrations(sql), migrations),
    defined,
    unknown,
  };
}

/**
 * Applies, in one transaction, the definitions whose text the database has not applied; none
 * when it has migrations this code does not know (read under the lock, so a newer replica
 * cannot migrate in between). A table lock not had within DEFINITIONS_LOCK_WAIT_MS (or a
 * deadlock) undoes the attempt, and it is tried again a while later, DEFINITIONS_ATTEMPTS times
 * in all (docs/operating.md#schema-changes).
 */
async function define(
  sql: Database,
  definitions: Definition[],
  migrations: Migration[],
  logger: Pick<Logger, "warn"> | undefined,
): Promise<{ defined: string[]; unknown: number[] }> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await inMigrationLock(sql, async (transaction) => {
        await transaction`select set_config('lock_timeout', ${`${DEFINITIONS_LOCK_WAIT_MS}ms`}, true)`;
        return defineLocked(transaction, definitions, migrations);
      });
    } catch (error) {
      const gaveWay =
        hasSqlState(error, SQL_STATE.lockNotAvailable) ||
        hasSqlState(error, SQL_STATE.deadlockDetected);
      if (!gaveWay || attempt >= DEFINITIONS_ATTEMPTS) throw error;
      logger?.warn(
        { err: error, attempt, attempts: DEFINITIONS_ATTEMPTS },
        "schema definitions gave way to writers holding their tables; trying again",
      );
      await setTimeout(Math.min(5_000, 250 * attempt));
    }
  }
}

async function defineLocked(
  transaction: Transaction,
  definitions: Definition[],
  migrations: Migration[],
): Promise<{ defined: string[]; unknown: number[] }> {
  const unknown = unknownMigrations(await readAppliedMigrations(transaction), migrations);
  if (unknown.length > 0 || definitions.length === 0) return { defined: [], unknown };
  await transaction`
    create table if not exists app.schema_definitions (
      name text primary key,
      checksum text not null,
      applied_at timestamptz not null default now()
    )`;
  const recorded = await transaction<{ name: string; checksum: string }[]>`
    select name, checksum from app.schema_definitions`;
  const applied = new Map(recorded.map((row) => [row.name, row.checksum]));
  const defined: string[] = [];
  for (const definition of definitions) {
    const checksum = textChecksum(definition.sql);
    if (applied.get(definition.name) === checksum) continue;
    await transaction.unsafe(definition.sql);
    await transaction`
      insert into app.schema_definitions (name, checksum) values (${definition.name}, ${checksum})
      on conflict (name) do update set checksum = excluded.checksum, applied_at = now()`;
    defined.push(definition.name);
  }
  return { defined, unknown };
}

/**
 * Whether the migration is applied, read under the migration lock. An applied row from before
 * checksums were kept, or holding an earlier text that differs in comments only, gets the
 * file's checksum.
 */
async function isApplied(sql: Sql, migration: Migration, checksum: string): Promise<boolean> {
  const [done] = await sql<{ checksum: string | null }[]>`
    select checksum from app.schema_migrations where id = ${migration.id}`;
  if (!done) return false;
  if (
    done.checksum === null ||
    (done.checksum !== checksum && sameStatements(migration, done.checksum))
  ) {
    await sql`update app.schema_migrations set checksum = ${checksum} where id = ${migration.id}`;
  }
  return true;
}

/**
 * Runs `apply` in a transaction holding the migration lock. The lock is asked for in a short
 * transaction of its own, again until it is free, never waited for inside one: a concurrent
 * index build in the process that holds the lock (OUTSIDE_TRANSACTION) waits for every
 * transaction that held a snapshot when it began, and a waiting one would never end.
 */
async function inMigrationLock<T>(
  sql: Database,
  apply: (transaction: Transaction) => Promise<T>,
): Promise<T> {
  for (;;) {
    const outcome = await sql.begin(async (transaction) => {
      const [row] = await transaction<{ locked: boolean }[]>`
        select pg_try_advisory_xact_lock(${MIGRATION_LOCK}) as locked`;
      return row?.locked ? { value: await apply(transaction) } : null;
    });
    if (outcome) return outcome.value as T;
    await setTimeout(LOCK_POLL_MS);
  }
}

/**
 * Applies `statements` of a migration marked OUTSIDE_TRANSACTION, on one connection holding the
 * migration lock for its session, statement by statement; recorded after its last statement.
 * False when another process applied it first.
 */
async function applyOutsideTransaction(
  sql: Database,
  migration: Migration,
  statements: string,
  checksum: string,
): Promise<boolean> {
  const connection = await sql.reserve();
  try {
    // Asked for statement by statement, outside a transaction, for the same reason as above.
    for (;;) {
      const [row] = await connection<{ locked: boolean }[]>`
        select pg_try_advisory_lock(${MIGRATION_LOCK}) as locked`;
      if (row?.locked) break;
      await setTimeout(LOCK_POLL_MS);
    }
    try {
      if (await isApplied(connection, migration, checksum)) return false;
      for (const statement of statementsOutsideTransaction(statements)) {
        await connection.unsafe(statement);
      }
      await connection`
        insert into app.schema_migrations (id, name, checksum)
        values (${migration.id}, ${migration.name}, ${checksum})`;
      return true;
    } finally {
      await connection`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    connection.release();
  }
}

/** Whether a migration's text asks to be applied outside a transaction: its first line. */
export function isOutsideTransaction(text: string): boolean {
  return text.split(/\r?\n/, 1)[0]?.trim() === OUTSIDE_TRANSACTION;
}

/** The statements of a migration run outside a transaction: each ends with `;` at a line's end. */
export function statementsOutsideTransaction(text: string): string[] {
  return text
    .split(/;[ \t]*\r?$/m)
    .map((statement) =>
      statement
        .split(/\r?\n/)
        .filter((line) => !line.trim().startsWith("--"))
        .join("\n")
        .trim(),
    )
    .filter((statement) => statement.length > 0);
}

/** A row of app.schema_migrations: checksum null when applied before checksums were kept. */
export interface AppliedMigration {
  id: number;
  checksum: string | null;
}

/**
 * What the database has applied, read without writing anything (`migrate` ends with it;
 * `doctor` reads it alone). Read through `to_jsonb`, so a table an older version made, without
 * the checksum column, reads as checksums not kept.
 */
export async function readAppliedMigrations(sql: Sql): Promise<AppliedMigration[]> {
  return sql<AppliedMigration[]>`
    select m.id, to_jsonb(m) ->> 'checksum' as checksum from app.schema_migrations m
    order by m.id`;
}

/** Applied migrations whose file has changed since; those without a checksum are not compared. */
export function driftedMigrations(
  applied: AppliedMigration[],
  migrations: Migration[],
): DriftedMigration[] {
  const byId = new Map(applied.map((row) => [row.id, row.checksum]));
  return migrations.flatMap((migration) => {
    const appliedChecksum = byId.get(migration.id);
    const fileChecksum = migrationChecksum(migration);
    return appliedChecksum && !sameStatements(migration, appliedChecksum)
      ? [{ id: migration.id, name: migration.name, appliedChecksum, fileChecksum }]
      : [];
  });
}

/** Applied migrations numbered past this code's newest: a newer version applied them. */
export function unknownMigrations(applied: AppliedMigration[], migrations: Migration[]): number[] {
  const newest = Math.max(0, ...migrations.map((migration) => migration.id));
  return applied.map((row) => row.id).filter((id) => id > newest);
}

/** `0014 create_claims_together, 0015 …`: drifted migrations named for a log line or doctor. */
export function describeMigrations(migrations: { id: number; name: string }[]): string {
  return migrations
    .map((migration) => `${String(migration.id).padStart(4, "0")} ${migration.name}`)
    .join(", ");
}
