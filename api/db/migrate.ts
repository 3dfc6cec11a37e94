import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Database } from "./connect.ts";

const defaultMigrationsDirectory = join(import.meta.dirname, "migrations");

/** Any constant works; it only has to be the same in every process that migrates. */
const MIGRATION_LOCK = 7_242_001;

export interface Migration {
  id: number;
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
}

/** Numbered plain SQL files: `0001_claims.sql`, `0002_…`; the number is the order. */
export async function readMigrations(directory = defaultMigrationsDirectory): Promise<Migration[]> {
  const files = (await readdir(directory)).filter((file) => file.endsWith(".sql")).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
    if (!match?.[1] || !match[2])
      throw new Error(`Migration file name ${file} is not NNNN_name.sql`);
    migrations.push({
      id: Number(match[1]),
      name: match[2],
      sql: await readFile(join(directory, file), "utf8"),
    });
  }
  return migrations;
}

/**
 * SHA-256 of a migration's text. Line endings are made LF first, so a checkout with CRLF
 * (git's autocrlf on Windows) is not reported as a change.
 */
export function migrationChecksum(migration: Migration): string {
  return createHash("sha256").update(migration.sql.replaceAll("\r\n", "\n")).digest("hex");
}

/**
 * Applies pending migrations, each in its own transaction. Every transaction first takes
 * a transaction-scoped advisory lock and then re-reads what is applied, so two processes
 * starting at once apply each migration exactly once (the second waits, then skips).
 *
 * Each applied migration's checksum is recorded, and an applied migration whose file has
 * changed since is reported in `drifted`, never applied again. A row from before checksums
 * were kept gets the file's checksum on the first run that sees it: the guard starts there.
 */
export async function migrate(
  sql: Database,
  directory = defaultMigrationsDirectory,
): Promise<MigrationRun> {
  const migrations = await readMigrations(directory);
  await sql.begin(async (transaction) => {
    await transaction`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
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
    await sql.begin(async (transaction) => {
      await transaction`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
      const [done] = await transaction<{ checksum: string | null }[]>`
        select checksum from app.schema_migrations where id = ${migration.id}`;
      if (done) {
        if (done.checksum === null) {
          await transaction`
            update app.schema_migrations set checksum = ${checksum} where id = ${migration.id}`;
        }
        return;
      }
      await transaction`
        insert into app.schema_migrations (id, name, checksum)
        values (${migration.id}, ${migration.name}, ${checksum})`;
      await transaction.unsafe(migration.sql);
      applied.push(migration.id);
    });
  }
  return { applied, drifted: driftedMigrations(await readAppliedMigrations(sql), migrations) };
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
export async function readAppliedMigrations(sql: Database): Promise<AppliedMigration[]> {
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
    return appliedChecksum && appliedChecksum !== fileChecksum
      ? [{ id: migration.id, name: migration.name, appliedChecksum, fileChecksum }]
      : [];
  });
}

/** `0014 create_claims_together, 0015 …`: drifted migrations named for a log line or doctor. */
export function describeMigrations(migrations: { id: number; name: string }[]): string {
  return migrations
    .map((migration) => `${String(migration.id).padStart(4, "0")} ${migration.name}`)
    .join(", ");
}
