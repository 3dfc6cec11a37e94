import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { connectDatabase } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { startEmbeddedPostgres } from "../../scripts/devnet/embeddedPostgres.ts";
import { databaseUrl } from "./database.ts";
import { ensureDovecot, missingDovecotMessage } from "./dovecot.ts";
import { freePort } from "./ports.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** A server where each test file creates its own database (as a superuser). */
    postgresAdminUrl: string;
    /** A database with every migration applied, which test databases are copied from. */
    templateDatabase: string;
  }
}

/**
 * PostgreSQL for the integration tests: DATABASE_URL's server when it is set, otherwise an
 * embedded one that lives as long as the test run. Test files never share a database; each
 * copies the run's migrated template.
 */
export default async function setup(project: TestProject) {
  // Before any file starts: two files installing at once would wait on apt's lock.
  const dovecot = await ensureDovecot();
  if (dovecot === "installed") console.log("Installed dovecot-imapd (apt) for the IMAP tests.");
  if (dovecot === "missing") console.warn(missingDovecotMessage());
  let adminUrl = process.env.DATABASE_URL;
  let stopServer = async () => {};
  if (!adminUrl) {
    // The parent must be traversable by the `postgres` user that runs the server as root.
    const directory = await mkdtemp(join(tmpdir(), "pay-and-earn-pg-"));
    await chmod(directory, 0o755);
    const server = await startEmbeddedPostgres({
      dataDirectory: join(directory, "data"),
      port: await freePort(),
      durable: false,
    });
    adminUrl = server.url();
    stopServer = async () => {
      await server.stop();
      await rm(directory, { recursive: true, force: true });
    };
  }

  const template = `test_template_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${template}`);
  const sql = connectDatabase(databaseUrl(adminUrl, template), { max: 1 });
  await migrate(sql);
  // A template must have no open connection while it is copied.
  await sql.end();
  project.provide("postgresAdminUrl", adminUrl);
  project.provide("templateDatabase", template);

  return async () => {
    await admin.unsafe(`drop database if exists ${template} with (force)`);
    await admin.end();
    await stopServer();
  };
}
