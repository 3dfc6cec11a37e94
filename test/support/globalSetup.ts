import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../scripts/devnet/embeddedPostgres.ts";
import { freePort } from "./ports.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** A server where each test file creates its own database (as a superuser). */
    postgresAdminUrl: string;
  }
}

/**
 * PostgreSQL for the integration tests: DATABASE_URL's server when it is set, otherwise an
 * embedded one that lives as long as the test run. Test files never share a database.
 */
export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide("postgresAdminUrl", process.env.DATABASE_URL);
    return;
  }
  // The parent must be traversable by the `postgres` user that runs the server as root.
  const directory = await mkdtemp(join(tmpdir(), "pay-and-earn-pg-"));
  await chmod(directory, 0o755);
  const server = await startEmbeddedPostgres({
    dataDirectory: join(directory, "data"),
    port: await freePort(),
    durable: false,
  });
  project.provide("postgresAdminUrl", server.url());
  return async () => {
    await server.stop();
    await rm(directory, { recursive: true, force: true });
  };
}
