import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import {
  driftedMigrations,
  migrate,
  migrationChecksum,
  readAppliedMigrations,
  readMigrations,
} from "../../api/db/migrate.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

let database: TestDatabase;
const pools: Database[] = [];

function pool(url: string): Database {
  const sql = connectDatabase(url, { max: 1 });
  pools.push(sql);
  return sql;
}

beforeAll(async () => {
  database = await createTestDatabase({ empty: true });
});

afterAll(async () => {
  await Promise.all(pools.map((sql) => sql.end()));
  await database?.drop();
});

/** `use` on a new empty database of its own (no migrations applied), dropped after. */
async function withEmptyDatabase(use: (sql: Database) => Promise<void>): Promise<void> {
  const fresh = await createTestDatabase({ empty: true });
  try {
    await use(pool(fresh.url));
  } finally {
    await fresh.drop();
  }
}

describe("migrations", () => {
  it("applies each migration once when several processes start at once", async () => {
    const directory = await mkdtemp(join(tmpdir(), "migrations-"));
    // Neither statement is idempotent: a second application would fail the run.
    await writeFile(
      join(directory, "0001_first.sql"),
      "create table app.first (id int primary key);",
    );
    await writeFile(
      join(directory, "0002_second.sql"),
      "create table app.second (id int primary key); insert into app.first values (1);",
    );

    const runs = await Promise.all([1, 2, 3, 4].map(() => migrate(pool(database.url), directory)));

    expect(runs.flatMap((run) => run.applied).sort()).toEqual([1, 2]);
    const sql = pool(database.url);
    expect(await sql`select id, name from app.schema_migrations order by id`).toEqual([
      { id: 1, name: "first" },
      { id: 2, name: "second" },
    ]);
    expect(await sql`select count(*)::int as n from app.first`).toEqual([{ n: 1 }]);
    expect(await migrate(sql, directory)).toEqual({ applied: [], drifted: [] });
  });

  it("rolls a failing migration back whole and applies nothing after it", async () => {
    await withEmptyDatabase(async (sql) => {
      const directory = await mkdtemp(join(tmpdir(), "migrations-"));
      await writeFile(join(directory, "0001_ok.sql"), "create table app.ok (id int);");
      await writeFile(
        join(directory, "0002_broken.sql"),
        "create table app.half (id int); select * from app.missing;",
      );
      await writeFile(join(directory, "0003_later.sql"), "create table app.later (id int);");

      await expect(migrate(sql, directory)).rejects.toMatchObject({ code: "42P01" });

      expect(await sql`select id from app.schema_migrations`).toEqual([{ id: 1 }]);
      const tables = await sql`
        select table_name from information_schema.tables where table_schema = 'app'
        order by table_name`;
      expect(tables.map((row) => row.table_name)).toEqual(["ok", "schema_migrations"]);
    });
  });

  it("has the service's own migrations numbered without gaps", async () => {
    const migrations = await readMigrations();
    expect(migrations.length).toBeGreaterThan(0);
    expect(migrations.map((migration) => migration.id)).toEqual(
      migrations.map((_, index) => index + 1),
    );
    await withEmptyDatabase(async (sql) => {
      expect(await migrate(sql)).toEqual({
        applied: migrations.map((migration) => migration.id),
        drifted: [],
      });
    });
  });

  it("reports an applied migration whose file changed, and never applies the new text", async () => {
    await withEmptyDatabase(async (sql) => {
      const directory = await mkdtemp(join(tmpdir(), "migrations-"));
      const file = join(directory, "0001_first.sql");
      const original =
        "create table app.first (id int primary key);\ninsert into app.first values (1);\n";
      await writeFile(file, original);
      expect(await migrate(sql, directory)).toEqual({ applied: [1], drifted: [] });
      const appliedChecksum = migrationChecksum({ id: 1, name: "first", sql: original });

      // The same text with Windows line endings is the same migration.
      await writeFile(file, original.replaceAll("\n", "\r\n"));
      expect(await migrate(sql, directory)).toEqual({ applied: [], drifted: [] });

      const changed = `${original}create table app.second (id int);\n`;
      await writeFile(file, changed);
      const drift = [
        {
          id: 1,
          name: "first",
          appliedChecksum,
          fileChecksum: migrationChecksum({ id: 1, name: "first", sql: changed }),
        },
      ];
      expect(await migrate(sql, directory)).toEqual({ applied: [], drifted: drift });
      expect(
        driftedMigrations(await readAppliedMigrations(sql), await readMigrations(directory)),
      ).toEqual(drift);
      // Reported on every start, not recorded over: the database still holds what it applied.
      expect(await migrate(sql, directory)).toEqual({ applied: [], drifted: drift });
      expect(await sql`select checksum from app.schema_migrations`).toEqual([
        { checksum: appliedChecksum },
      ]);
      expect(await sql`select to_regclass('app.second') as second`).toEqual([{ second: null }]);
      expect(await sql`select count(*)::int as n from app.first`).toEqual([{ n: 1 }]);
    });
  });

  it("upgrades a database migrated before checksums were kept: the files it sees become the record", async () => {
    await withEmptyDatabase(async (sql) => {
      const directory = await mkdtemp(join(tmpdir(), "migrations-"));
      await writeFile(join(directory, "0001_first.sql"), "create table app.first (id int);");
      await writeFile(join(directory, "0002_second.sql"), "create table app.second (id int);");
      // What the earlier migrate left: its table without a checksum, migration 1 applied.
      await sql`create schema app`;
      await sql`
        create table app.schema_migrations (
          id integer primary key,
          name text not null,
          applied_at timestamptz not null default now()
        )`;
      await sql`insert into app.schema_migrations (id, name) values (1, 'first')`;
      await sql`create table app.first (id int)`;

      expect(await migrate(sql, directory)).toEqual({ applied: [2], drifted: [] });

      const migrations = await readMigrations(directory);
      expect(await sql`select id, checksum from app.schema_migrations order by id`).toEqual(
        migrations.map((migration) => ({
          id: migration.id,
          checksum: migrationChecksum(migration),
        })),
      );
    });
  });
});
