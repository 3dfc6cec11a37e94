import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { connectDatabase } from "../../../api/db/connect.ts";
import { migrate } from "../../../api/db/migrate.ts";
import {
  type RunningPostgres,
  startEmbeddedPostgres,
} from "../../../scripts/devnet/embeddedPostgres.ts";
import { freePort } from "../ports.ts";

/**
 * A PostgreSQL server of the fault suite's own (the embedded binaries from npm), so the suite
 * can stop and start it mid-stream without touching the server other tests share. One migrated
 * database on it; the same data directory and port across restarts.
 */
export async function startRestartablePostgres() {
  // The parent must be traversable by the `postgres` user that runs the server as root.
  const directory = await mkdtemp(join(tmpdir(), "pay-and-earn-faults-pg-"));
  await chmod(directory, 0o755);
  const dataDirectory = join(directory, "data");
  const port = await freePort();
  const start = () => startEmbeddedPostgres({ dataDirectory, port, durable: false });
  let server: RunningPostgres = await start();

  const admin = postgres(server.url(), { max: 1, onnotice: () => {} });
  await admin.unsafe("create database faults");
  await admin.end();
  const url = server.url("faults");
  const sql = connectDatabase(url, { max: 1 });
  await migrate(sql);
  await sql.end();

  return {
    url,
    /**
     * A fast shutdown (every session ended, as a restart by an operator or a failover does),
     * then the same server again; resolves once it accepts connections.
     */
    async restart(): Promise<void> {
      await server.stop();
      server = await start();
    },
    async stop(): Promise<void> {
      await server.stop();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

export type RestartablePostgres = Awaited<ReturnType<typeof startRestartablePostgres>>;
