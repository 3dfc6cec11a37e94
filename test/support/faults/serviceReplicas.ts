import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Database } from "../../../api/db/connect.ts";
import { LOCK_KEYS } from "../../../api/workers/lockKeys.ts";
import { freePort } from "../ports.ts";
import { type ServiceProcess, startServiceProcess } from "../serviceProcess.ts";
import { waitFor } from "../waitFor.ts";

export interface Replica {
  name: string;
  port: number;
  /** Where its SMTP intake listens (MAIL_INTAKE=smtp). */
  smtpPort: number;
  url: string;
  process: ServiceProcess | undefined;
  /** Every process this replica ran (to show their output when something fails). */
  history: ServiceProcess[];
}

/**
 * How long one readiness probe may take: a request that never gets an answer must not stall the
 * start (undici would give up only after 300 s). Health answers within ~2 s even when the RPC or
 * the database hangs (each check has a 2 s time-out).
 */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Service processes (`node api/main.ts`, workers and HTTP) on fixed ports, as a supervisor
 * would run them: a killed replica comes back on the same ports with the same settings.
 */
export function createReplicas(
  env: (replica: Pick<Replica, "port" | "smtpPort">) => Record<string, string>,
) {
  const replicas: Replica[] = [];

  async function add(name: string): Promise<Replica> {
    const port = await freePort();
    const replica: Replica = {
      name,
      port,
      smtpPort: await freePort(),
      url: `http://127.0.0.1:${port}`,
      process: undefined,
      history: [],
    };
    replicas.push(replica);
    return replica;
  }

  /**
   * Starts the replica's process and waits until it answers HTTP. A process that exits first
   * fails at once; either failure carries what the process wrote.
   */
  async function start(replica: Replica): Promise<void> {
    const started = startServiceProcess(env(replica));
    replica.process = started;
    replica.history.push(started);
    const serving = waitFor(
      () =>
        fetch(`${replica.url}/api/health`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) }).then(
          () => true,
        ),
      // A service start (Node, its modules, the migration lock) took over 60 s once in a whole
      // `npm test` at load 15, with nothing written yet: the bound is for a hang, not for load.
      { timeoutMs: 150_000, intervalMs: 100, what: `${replica.name} to serve` },
    );
    const exited = started.exited.then((exit) => {
      throw new Error(`${replica.name} exited (${exit.signal ?? `code ${exit.code}`})`);
    });
    await Promise.race([serving, exited]).catch((error: Error) => {
      throw new Error(
        `${error.message}\n── ${replica.name} #${replica.history.length} wrote:\n${started.output()}`,
      );
    });
  }

  /** SIGKILL: no shutdown hook, no finally block, no flushed state. */
  async function kill(replica: Replica): Promise<void> {
    await replica.process?.kill();
    replica.process = undefined;
  }

  return {
    replicas,
    add,
    start,
    kill,
    running: () => replicas.filter((replica) => replica.process !== undefined),
    async stopAll(): Promise<void> {
      await Promise.all(replicas.map((replica) => replica.process?.stop()));
      for (const replica of replicas) replica.process = undefined;
    },
    /**
     * Everything every process of every replica wrote, a file each in `directory` (a failed
     * run's evidence: the last lines of `output` rarely reach back to the cause).
     */
    async saveOutput(directory: string): Promise<string[]> {
      await mkdir(directory, { recursive: true });
      const files: string[] = [];
      for (const replica of replicas) {
        for (const [index, run] of replica.history.entries()) {
          const file = join(directory, `${replica.name}-${index + 1}-pid${run.pid}.log`);
          await writeFile(file, run.fullOutput());
          files.push(file);
        }
      }
      return files;
    },
    /** The last lines every process of every replica wrote (for a failure message). */
    output(): string {
      return replicas
        .flatMap((replica) =>
          replica.history.map((run, index) => `── ${replica.name} #${index + 1}\n${run.output()}`),
        )
        .join("\n");
    },
  };
}

export type Replicas = ReturnType<typeof createReplicas>;

/**
 * The replica whose connection holds the payout sender's advisory lock, found by the client
 * port of the backend that holds it: that port is one of the replica process's sockets.
 */
export async function payoutLockHolder(
  sql: Database,
  replicas: Replica[],
): Promise<Replica | undefined> {
  const port = (await payoutLockBackends(sql))[0]?.client_port;
  if (!port) return undefined;
  return replicas.find((replica) => replica.process && localPortsOf(replica.process.pid).has(port));
}

/** The backends that hold the payout sender's advisory lock (one, or none between holders). */
function payoutLockBackends(sql: Database) {
  return sql<{ pid: number; client_port: number | null; state: string | null }[]>`
    select activity.pid, activity.client_port, activity.state from pg_locks locks
    join pg_stat_activity activity on activity.pid = locks.pid
    where locks.locktype = 'advisory' and locks.granted
      and locks.objid = ${LOCK_KEYS.payoutSender}
      and locks.database = (select oid from pg_database where datname = current_database())`;
}

/**
 * What the database and the processes say about the payout lock, for a takeover that did not
 * happen: the backend holding it (if any) and each replica's process, alive or gone.
 */
export async function describePayoutLock(sql: Database, replicas: Replica[]): Promise<string> {
  const holders = await payoutLockBackends(sql);
  const processes = replicas.map((replica) => {
    const pid = replica.process?.pid;
    if (pid === undefined) return `${replica.name}: not running`;
    const alive = existsSync(`/proc/${pid}`);
    const ports = alive ? [...localPortsOf(pid)].join(",") : "";
    return `${replica.name}: pid ${pid} ${alive ? `alive, ports ${ports}` : "gone"}`;
  });
  return `lock held by backends ${JSON.stringify(holders)}; ${processes.join("; ")}`;
}

/** Local TCP ports of the sockets `pid` has open (Linux: its fds, then /proc/net/tcp{,6}). */
function localPortsOf(pid: number): Set<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`, { encoding: "utf8" });
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    }
  } catch {
    return new Set();
  }
  const ports = new Set<number>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const local = fields[1];
      const inode = fields[9];
      if (local && inode && inodes.has(inode)) {
        ports.add(Number.parseInt(local.split(":")[1] ?? "0", 16));
      }
    }
  }
  return ports;
}
