import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDatabase, type Database, type Sql } from "../../api/db/connect.ts";
import {
  driftedMigrations,
  migrate,
  migrationChecksum,
  readAppliedMigrations,
  readDefinitions,
  readMigrations,
  SERVICE_SCHEMA,
} from "../../api/db/migrate.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { holdTableLock } from "../support/tableLock.ts";
import { waitFor } from "../support/waitFor.ts";

let database: TestDatabase;
const pools: Database[] = [];
/** Folders the tests wrote their migration and definition files into, removed after. */
const folders: string[] = [];

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
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

async function temporaryFolder(prefix: string): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), prefix));
  folders.push(folder);
  return folder;
}

/** A migrations folder of its own, with these files (name: SQL). */
async function migrationFiles(files: Record<string, string>): Promise<string> {
  const directory = await temporaryFolder("migrations-");
  await write(directory, files);
  return directory;
}

async function write(directory: string, files: Record<string, string>): Promise<void> {
  await mkdir(directory, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(directory, name), text);
}

/** `use` on a new empty database of its own (no migrations applied), dropped after. */
async function withEmptyDatabase(
  use: (sql: Database, url: string) => Promise<void>,
): Promise<void> {
  const fresh = await createTestDatabase({ empty: true });
  try {
    await use(pool(fresh.url), fresh.url);
  } finally {
    await fresh.drop();
  }
}

/** `use` on a new database of its own with the service's schema (the template's), dropped after. */
async function withServiceDatabase(
  use: (sql: Database, url: string) => Promise<void>,
): Promise<void> {
  const fresh = await createTestDatabase();
  try {
    await use(pool(fresh.url), fresh.url);
  } finally {
    await fresh.drop();
  }
}

/** Whether each index of that name in schema app is valid (usable by reads). */
function indexValidity(sql: Database, name: string) {
  return sql<{ valid: boolean }[]>`
    select i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid
    where c.relname = ${name} and c.relnamespace = 'app'::regnamespace`;
}

describe("migrations", () => {
  it("applies each migration once when several processes start at once", async () => {
    // Neither statement is idempotent: a second application would fail the run.
    const directory = await migrationFiles({
      "0001_first.sql": "create table app.first (id int primary key);",
      "0002_second.sql":
        "create table app.second (id int primary key); insert into app.first values (1);",
    });

    const runs = await Promise.all(
      [1, 2, 3, 4].map(() => migrate(pool(database.url), { migrations: directory })),
    );

    expect(runs.flatMap((run) => run.applied).sort()).toEqual([1, 2]);
    const sql = pool(database.url);
    expect(await sql`select id, name from app.schema_migrations order by id`).toEqual([
      { id: 1, name: "first" },
      { id: 2, name: "second" },
    ]);
    expect(await sql`select count(*)::int as n from app.first`).toEqual([{ n: 1 }]);
    expect(await migrate(sql, { migrations: directory })).toEqual({
      applied: [],
      drifted: [],
      defined: [],
      unknown: [],
    });
  });

  it("rolls a failing migration back whole and applies nothing after it", async () => {
    await withEmptyDatabase(async (sql) => {
      const directory = await migrationFiles({
        "0001_ok.sql": "create table app.ok (id int);",
        "0002_broken.sql": "create table app.half (id int); select * from app.missing;",
        "0003_later.sql": "create table app.later (id int);",
      });

      await expect(migrate(sql, { migrations: directory })).rejects.toMatchObject({
        code: "42P01",
      });

      expect(await sql`select id from app.schema_migrations`).toEqual([{ id: 1 }]);
      const tables = await sql`
        select table_name from information_schema.tables where table_schema = 'app'
        order by table_name`;
      expect(tables.map((row) => row.table_name)).toEqual(["ok", "schema_migrations"]);
    });
  });

  it("applies a file marked no-transaction outside one, once, while others start at once", async () => {
    await withEmptyDatabase(async (_sql, url) => {
      const directory = await migrationFiles({
        "0001_table.sql": "create table app.t (id int primary key, email text);",
        // Inside a transaction PostgreSQL refuses `concurrently` (25001): this passes only outside.
        "0002_index.sql": [
          "--! no-transaction",
          "-- why, as a comment",
          "drop index concurrently if exists app.t_by_email;",
          "create index concurrently t_by_email on app.t (email);",
          "insert into app.t values (1, 'once');",
        ].join("\n"),
        "0003_after.sql": "insert into app.t values (2, 'after');",
      });

      const runs = await Promise.all(
        [1, 2, 3, 4].map(() => migrate(pool(url), { migrations: directory })),
      );

      expect(runs.flatMap((run) => run.applied).sort()).toEqual([1, 2, 3]);
      const sql = pool(url);
      expect(await sql`select id from app.t order by id`).toEqual([{ id: 1 }, { id: 2 }]);
      expect(await indexValidity(sql, "t_by_email")).toEqual([{ valid: true }]);
    });
  });

  it("builds again, on the next start, an index whose concurrent build was interrupted", async () => {
    await withEmptyDatabase(async (sql) => {
      const directory = await migrationFiles({
        "0001_table.sql": "create table app.t (id int); insert into app.t values (1), (1);",
        "0002_index.sql": [
          "--! no-transaction",
          "drop index concurrently if exists app.t_unique;",
          "create unique index concurrently t_unique on app.t (id);",
        ].join("\n"),
      });
      // A build that fails part way leaves its index behind, invalid: as a crash would.
      await expect(migrate(sql, { migrations: directory })).rejects.toMatchObject({
        code: "23505",
      });
      expect(await indexValidity(sql, "t_unique")).toEqual([{ valid: false }]);
      expect(await sql`select id from app.schema_migrations`).toEqual([{ id: 1 }]);

      await sql`delete from app.t where ctid = (select max(ctid) from app.t)`;
      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [2],
        drifted: [],
        defined: [],
        unknown: [],
      });
      expect(await indexValidity(sql, "t_unique")).toEqual([{ valid: true }]);
      // The session's lock went with the run: a later run takes it again.
      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [],
        drifted: [],
        defined: [],
        unknown: [],
      });
    });
  });

  it("has the service's own migrations numbered without gaps", async () => {
    const migrations = await readMigrations();
    expect(migrations.length).toBeGreaterThan(0);
    expect(migrations.map((migration) => migration.id)).toEqual(
      migrations.map((_, index) => index + 1),
    );
    const definitions = await readDefinitions();
    expect(definitions.length).toBeGreaterThan(0);
    await withEmptyDatabase(async (sql) => {
      expect(await migrate(sql)).toEqual({
        applied: migrations.map((migration) => migration.id),
        drifted: [],
        defined: definitions.map((definition) => definition.name),
        unknown: [],
      });
      expect(await migrate(sql)).toEqual({ applied: [], drifted: [], defined: [], unknown: [] });
    });
  });

  it("reports an applied migration whose file changed, and never applies the new text", async () => {
    await withEmptyDatabase(async (sql) => {
      const original =
        "create table app.first (id int primary key);\ninsert into app.first values (1);\n";
      const directory = await migrationFiles({ "0001_first.sql": original });
      const file = join(directory, "0001_first.sql");
      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [1],
        drifted: [],
        defined: [],
        unknown: [],
      });
      const appliedChecksum = migrationChecksum({ id: 1, name: "first", sql: original });

      // The same text with Windows line endings is the same migration.
      await writeFile(file, original.replaceAll("\n", "\r\n"));
      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [],
        drifted: [],
        defined: [],
        unknown: [],
      });

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
      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [],
        drifted: drift,
        defined: [],
        unknown: [],
      });
      expect(
        driftedMigrations(await readAppliedMigrations(sql), await readMigrations(directory)),
      ).toEqual(drift);
      // Reported on every start, not recorded over: the database still holds what it applied.
      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [],
        drifted: drift,
        defined: [],
        unknown: [],
      });
      expect(await sql`select checksum from app.schema_migrations`).toEqual([
        { checksum: appliedChecksum },
      ]);
      expect(await sql`select to_regclass('app.second') as second`).toEqual([{ second: null }]);
      expect(await sql`select count(*)::int as n from app.first`).toEqual([{ n: 1 }]);
    });
  });

  it("upgrades a database migrated before checksums were kept: the files it sees become the record", async () => {
    await withEmptyDatabase(async (sql) => {
      const directory = await migrationFiles({
        "0001_first.sql": "create table app.first (id int);",
        "0002_second.sql": "create table app.second (id int);",
      });
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

      expect(await migrate(sql, { migrations: directory })).toEqual({
        applied: [2],
        drifted: [],
        defined: [],
        unknown: [],
      });

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

/** A migrations folder and a definitions folder of their own, with these files. */
async function schemaFiles(files: {
  migrations: Record<string, string>;
  definitions: Record<string, string>;
}) {
  const root = await temporaryFolder("schema-");
  const sources = { migrations: join(root, "migrations"), definitions: join(root, "definitions") };
  await write(sources.migrations, files.migrations);
  await write(sources.definitions, files.definitions);
  return sources;
}

const answering = (value: number) =>
  `create or replace function app.answer() returns int language sql as 'select ${value}';`;

describe("definitions (api/db/definitions)", () => {
  it("are applied after the migrations once, by one of several processes starting at once, and again only when their text changes", async () => {
    await withEmptyDatabase(async (sql, url) => {
      const sources = await schemaFiles({
        migrations: { "0001_first.sql": "create table app.first (id int);" },
        definitions: {
          "answer.sql": answering(1),
          // Needs the migration's table: applied after it.
          "first_count.sql":
            "create or replace view app.first_count as select count(*) as n from app.first;",
        },
      });
      const runs = await Promise.all([1, 2, 3, 4].map(() => migrate(pool(url), sources)));
      expect(runs.flatMap((run) => run.defined).sort()).toEqual(["answer", "first_count"]);
      expect(await sql`select app.answer() as answer`).toEqual([{ answer: 1 }]);

      await write(sources.definitions, { "answer.sql": answering(2) });
      expect(await migrate(sql, sources)).toEqual({
        applied: [],
        drifted: [],
        defined: ["answer"],
        unknown: [],
      });
      expect(await sql`select app.answer() as answer`).toEqual([{ answer: 2 }]);
    });
  });

  it("are applied whole or not at all: a broken one leaves every definition as it was", async () => {
    await withEmptyDatabase(async (sql) => {
      const sources = await schemaFiles({
        migrations: { "0001_first.sql": "create table app.first (id int);" },
        definitions: { "answer.sql": answering(1) },
      });
      await migrate(sql, sources);
      await write(sources.definitions, {
        "answer.sql": answering(2),
        "broken.sql": "create or replace view app.broken as select * from app.missing;",
      });
      await expect(migrate(sql, sources)).rejects.toMatchObject({ code: "42P01" });
      expect(await sql`select app.answer() as answer`).toEqual([{ answer: 1 }]);
      expect(await sql`select name from app.schema_definitions`).toEqual([{ name: "answer" }]);
    });
  });

  it("give way to writers holding a table they put a trigger on, and are applied once those are done", async () => {
    await withServiceDatabase(async (sql, url) => {
      // A trigger to make again (a first deploy of ledger_stats.sql), on a table a writer holds.
      await sql`drop trigger ledger_follows_payments on app.payments`;
      await sql`delete from app.schema_definitions where name = 'ledger_stats'`;
      const holder = await holdTableLock(pool(url), ["app.payments"], "row exclusive");
      const migrating = migrate(pool(url));
      await waitFor(
        async () => {
          const [row] = await sql<{ waiting: boolean }[]>`
            select exists (select 1 from pg_locks
              where relation = 'app.payments'::regclass and not granted
                and mode = 'ShareRowExclusiveLock') as waiting`;
          return row?.waiting === true;
        },
        { what: "the definitions to wait for app.payments" },
      );
      // A new writer of the table is not queued behind the waiting definitions for good: they
      // give way after DEFINITIONS_LOCK_WAIT_MS (10 s is only the failure bound).
      await pool(url).begin(async (transaction) => {
        await transaction`set local lock_timeout = '10s'`;
        await transaction`lock table app.payments in row exclusive mode`;
      });
      await holder.release();
      expect((await migrating).defined).toEqual(["ledger_stats"]);
      expect(
        await sql`select tgname from pg_trigger where tgname = 'ledger_follows_payments'`,
      ).toEqual([{ tgname: "ledger_follows_payments" }]);
    });
  });

  it("lock none of the tables their triggers are on when only a function's text changed", async () => {
    await withServiceDatabase(async (sql, url) => {
      // As if a function body of each file that makes triggers had been edited: its text is
      // applied again.
      const withTriggers = ["events", "ledger_stats", "outbox_wakes_sender"];
      await sql`delete from app.schema_definitions where name in ${sql(withTriggers)}`;
      const holder = await holdTableLock(
        pool(url),
        ["app.claims", "app.payouts", "app.payments", "app.unmatched_transfers", "app.outbox"],
        "row exclusive",
      );
      try {
        // Would wait for the holder's writes, and fail after its tries, if a trigger were made
        // again.
        expect((await migrate(pool(url))).defined).toEqual(withTriggers);
      } finally {
        await holder.release();
      }
    });
  });

  it("are kept by older code in a database a newer version migrated", async () => {
    await withEmptyDatabase(async (sql) => {
      const newer = await schemaFiles({
        migrations: {
          "0001_first.sql": "create table app.first (id int);",
          "0002_second.sql": "create table app.second (id int);",
        },
        definitions: { "answer.sql": answering(2) },
      });
      const older = await schemaFiles({
        migrations: { "0001_first.sql": "create table app.first (id int);" },
        definitions: { "answer.sql": answering(1) },
      });
      await migrate(sql, newer);
      expect(await migrate(sql, older)).toEqual({
        applied: [],
        drifted: [],
        defined: [],
        unknown: [2],
      });
      expect(await sql`select app.answer() as answer`).toEqual([{ answer: 2 }]);
    });
  });
});

/** Every function, procedure, view and trigger of schema app, as PostgreSQL prints it back. */
async function appDefinitions(sql: Sql): Promise<{ object: string; definition: string }[]> {
  return sql<{ object: string; definition: string }[]>`
    select case p.prokind when 'p' then 'procedure ' else 'function ' end
        || p.oid::regprocedure::text as object,
      pg_get_functiondef(p.oid) as definition
    from pg_proc p where p.pronamespace = 'app'::regnamespace
    union all
    select 'view ' || c.oid::regclass::text, pg_get_viewdef(c.oid)
    from pg_class c where c.relnamespace = 'app'::regnamespace and c.relkind in ('v', 'm')
    union all
    select 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text, pg_get_triggerdef(t.oid)
    from pg_trigger t join pg_class c on c.oid = t.tgrelid
    where c.relnamespace = 'app'::regnamespace and not t.tgisinternal
    order by 1`;
}

/** The newest migration written before the definitions had a folder of their own. */
const LAST_MIGRATION_WITH_DEFINITIONS = 23;

describe("the service's functions, views and triggers", () => {
  it("are each defined once, in api/db/definitions: the definitions alone make all of them, as they are in a migrated database", async () => {
    const migrated = await createTestDatabase();
    try {
      const sql = pool(migrated.url);
      const live = await appDefinitions(sql);
      expect(live.map((row) => row.object)).toEqual(
        expect.arrayContaining([
          "function app.create_claim(text,text,text,text,text,text,bigint,integer,integer,numeric,timestamp with time zone,timestamp with time zone,numeric[])",
          "view app.claim_details",
          "trigger outbox_wakes_sender on app.outbox",
        ]),
      );
      const definitions = await readDefinitions();
      const rebuilt = await sql
        .begin(async (transaction) => {
          for (const row of live.filter((each) => each.object.startsWith("trigger "))) {
            const [, name, table] = /^trigger (\S+) on (\S+)$/.exec(row.object) ?? [];
            await transaction.unsafe(`drop trigger ${name} on ${table}`);
          }
          for (const row of live.filter((each) => each.object.startsWith("view "))) {
            await transaction.unsafe(`drop view if exists ${row.object.slice(5)} cascade`);
          }
          for (const row of live.filter((each) => each.object.startsWith("function "))) {
            await transaction.unsafe(`drop function if exists ${row.object.slice(9)} cascade`);
          }
          for (const row of live.filter((each) => each.object.startsWith("procedure "))) {
            await transaction.unsafe(`drop procedure if exists ${row.object.slice(10)} cascade`);
          }
          expect(await appDefinitions(transaction)).toEqual([]);
          for (const definition of definitions) await transaction.unsafe(definition.sql);
          // Rolled back: the database stays as migrated.
          throw new RebuiltDefinitions(await appDefinitions(transaction));
        })
        .catch((error: unknown) => {
          if (error instanceof RebuiltDefinitions) return error.rows;
          throw error;
        });
      expect(rebuilt).toEqual(live);
    } finally {
      await migrated.drop();
    }
  });

  it("are never defined by a migration written since the definitions folder", async () => {
    const later = (await readMigrations(SERVICE_SCHEMA.migrations)).filter(
      (migration) => migration.id > LAST_MIGRATION_WITH_DEFINITIONS,
    );
    const defining = later
      .filter((migration) =>
        /\b(create|alter|drop)\s+(or\s+replace\s+)?(function|procedure|view|materialized\s+view|trigger)\b/i.test(
          migration.sql,
        ),
      )
      .map((migration) => migration.name);
    expect(defining).toEqual([]);
  });
});

class RebuiltDefinitions extends Error {
  readonly rows: { object: string; definition: string }[];
  constructor(rows: { object: string; definition: string }[]) {
    super("rolled back on purpose");
    this.rows = rows;
  }
}
