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
 * Applies pending migrations, each in its own transaction. Every transaction first takes
 * a transaction-scoped advisory lock and then re-reads what is applied, so two processes
 * starting at once apply each migration exactly once (the second waits, then skips).
 */
export async function migrate(
  sql: Database,
  directory = defaultMigrationsDirectory,
): Promise<number[]> {
  const migrations = await readMigrations(directory);
  const applied: number[] = [];
  for (const migration of migrations) {
    await sql.begin(async (transaction) => {
      await transaction`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
      await transaction`create schema if not exists app`;
      await transaction`
        create table if not exists app.schema_migrations (
          id integer primary key,
          name text not null,
          applied_at timestamptz not null default now()
        )`;
      const [done] = await transaction`
        select 1 from app.schema_migrations where id = ${migration.id}`;
      if (done) return;
      await transaction`
        insert into app.schema_migrations (id, name) values (${migration.id}, ${migration.name})`;
      await transaction.unsafe(migration.sql);
      applied.push(migration.id);
    });
  }
  return applied;
}
