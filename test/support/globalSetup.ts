import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { connectDatabase } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { countRows } from "../../api/db/rowCounts.ts";
import { startEmbeddedPostgres } from "../../scripts/devnet/embeddedPostgres.ts";
import { databaseUrl } from "./database.ts";
import { DOVECOT_INSTALL_STATUS, ensureDovecot, missingDovecotMessage } from "./dovecot.ts";
import { freePort } from "./ports.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** A server where each test file creates its own database (as a superuser). */
    postgresAdminUrl: string;
    /** A database with every migration applied, which test databases are copied from. */
    templateDatabase: string;
    /** This run's Dovecot install, named in its status file (dovecot.ts). */
    dovecotInstallId: string;
  }
}

/**
 * PostgreSQL for the integration tests: DATABASE_URL's server when it is set, otherwise an
 * embedded one that lives as long as the test run. Test files never share a database; each
 * copies the run's migrated template.
 */
export default async function setup(project: TestProject) {
  // Once for the run, beside the tests: apt takes 15-30 s and only the IMAP tests need it; they
  // wait on the status file for this run's install to end (dovecot.ts).
  const dovecotInstallId = randomBytes(6).toString("hex");
  project.provide("dovecotInstallId", dovecotInstallId);
  await mkdir(dirname(DOVECOT_INSTALL_STATUS), { recursive: true });
  await writeFile(DOVECOT_INSTALL_STATUS, `installing ${dovecotInstallId}`);
  const dovecotInstalled = ensureDovecot().then(async (dovecot) => {
    await writeFile(DOVECOT_INSTALL_STATUS, `${dovecot} ${dovecotInstallId}`);
    if (dovecot === "installed") console.log("Installed dovecot-imapd (apt) for the IMAP tests.");
    if (dovecot === "missing") console.warn(missingDovecotMessage());
  });
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
  // The ledger's count, as the service's ledger-count worker runs it after a start (one batch on
  // an empty database): the tests' databases keep their ledger figures from the first write.
  await sql`call app.count_ledger_figures()`;
  // The scrape's counts, as the row-counts worker counts them once after a start: the tests'
  // databases read the kept counts from the first write.
  await countRows(sql);
  // A template must have no open connection while it is copied.
  await sql.end();
  project.provide("postgresAdminUrl", adminUrl);
  project.provide("templateDatabase", template);

  return async () => {
    await dovecotInstalled;
    await admin.unsafe(`drop database if exists ${template} with (force)`);
    await admin.end();
    await stopServer();
  };
}
