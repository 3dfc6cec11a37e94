import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate, readMigrations } from "../../api/db/migrate.ts";
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

    expect(runs.flat().sort()).toEqual([1, 2]);
    const sql = pool(database.url);
    expect(await sql`select id, name from app.schema_migrations order by id`).toEqual([
      { id: 1, name: "first" },
      { id: 2, name: "second" },
    ]);
    expect(await sql`select count(*)::int as n from app.first`).toEqual([{ n: 1 }]);
    expect(await migrate(sql, directory)).toEqual([]);
  });

  it("rolls a failing migration back whole and applies nothing after it", async () => {
    const failing = await createTestDatabase({ empty: true });
    try {
      const directory = await mkdtemp(join(tmpdir(), "migrations-"));
      await writeFile(join(directory, "0001_ok.sql"), "create table app.ok (id int);");
      await writeFile(
        join(directory, "0002_broken.sql"),
        "create table app.half (id int); select * from app.missing;",
      );
      await writeFile(join(directory, "0003_later.sql"), "create table app.later (id int);");
      const sql = pool(failing.url);

      await expect(migrate(sql, directory)).rejects.toMatchObject({ code: "42P01" });

      expect(await sql`select id from app.schema_migrations`).toEqual([{ id: 1 }]);
      const tables = await sql`
        select table_name from information_schema.tables where table_schema = 'app'
        order by table_name`;
      expect(tables.map((row) => row.table_name)).toEqual(["ok", "schema_migrations"]);
    } finally {
      await failing.drop();
    }
  });

  it("has the service's own migrations numbered without gaps", async () => {
    const migrations = await readMigrations();
    expect(migrations.length).toBeGreaterThan(0);
    expect(migrations.map((migration) => migration.id)).toEqual(
      migrations.map((_, index) => index + 1),
    );
    const fresh = await createTestDatabase({ empty: true });
    try {
      expect(await migrate(pool(fresh.url))).toEqual(migrations.map((migration) => migration.id));
    } finally {
      await fresh.drop();
    }
  });
});
