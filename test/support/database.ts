import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { inject } from "vitest";
import { connectDatabase, type Database } from "../../api/db/connect.ts";

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/**
 * A fresh database on the test server, for one test file: a copy of the run's migrated
 * template (globalSetup.ts), so no file pays for the migrations again; `empty: true` for the
 * few tests that migrate themselves (the migration tests). `icuLocale` makes an empty one whose
 * text is ordered by that ICU locale instead of by bytes (the test server's C locale), as a
 * production server's locale may order it.
 */
export async function createTestDatabase(
  options: { empty?: boolean; icuLocale?: "en" } = {},
): Promise<TestDatabase> {
  const adminUrl = inject("postgresAdminUrl");
  const template = options.empty || options.icuLocale ? "template0" : inject("templateDatabase");
  const name = `test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  // The locale is one of the type's literals, not input.
  const locale = options.icuLocale ? ` locale_provider icu icu_locale '${options.icuLocale}'` : "";
  try {
    await admin.unsafe(`create database ${name} template ${template}${locale}`);
  } finally {
    await admin.end();
  }
  return {
    url: databaseUrl(adminUrl, name),
    name,
    async drop() {
      const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      await cleanup.end();
    },
  };
}

export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * `run` on a database of its own, over one connection, dropped afterwards: for a test that sets
 * statistics or table options the rest of its file must not see.
 */
export async function withOwnDatabase<T>(run: (sql: Database) => Promise<T>): Promise<T> {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 1 });
  try {
    return await run(sql);
  } finally {
    await sql.end({ timeout: 1 });
    await database.drop();
  }
}
