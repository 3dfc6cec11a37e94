import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { Database } from "../../../api/db/connect.ts";
import { LOCK_KEYS } from "../../../api/workers/lockKeys.ts";
import { freePort } from "../../support/ports.ts";
import { type ServiceProcess, startServiceProcess } from "../../support/serviceProcess.ts";
import { waitFor } from "../../support/waitFor.ts";

export interface Replica {
  name: string;
  port: number;
  url: string;
  process: ServiceProcess | undefined;
  /** Every process this replica ran (to show their output when something fails). */
  history: ServiceProcess[];
}

/**
 * Service processes (`node api/main.ts`, workers and HTTP) on fixed ports, as a supervisor
 * would run them: a killed replica comes back on the same port with the same settings.
 */
export function createReplicas(env: (port: number) => Record<string, string>) {
  const replicas: Replica[] = [];

  async function add(name: string): Promise<Replica> {
    const port = await freePort();
    const replica: Replica = {
      name,
      port,
      url: `http://127.0.0.1:${port}`,
      process: undefined,
      history: [],
    };
    replicas.push(replica);
    return replica;
  }

  async function start(replica: Replica): Promise<void> {
    const started = startServiceProcess(env(replica.port));
    replica.process = started;
    replica.history.push(started);
    await waitFor(
      async () => {
        const exit = await Promise.race([started.exited, Promise.resolve(undefined)]);
        if (exit) throw new Error(`${replica.name} exited: ${started.output()}`);
        return fetch(`${replica.url}/api/health`).then(() => true);
      },
      { timeoutMs: 60_000, intervalMs: 100, what: `${replica.name} to serve` },
    );
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
  const rows = await sql<{ client_port: number | null }[]>`
    select activity.client_port from pg_locks locks
    join pg_stat_activity activity on activity.pid = locks.pid
    where locks.locktype = 'advisory' and locks.granted
      and locks.objid = ${LOCK_KEYS.payoutSender}
      and locks.database = (select oid from pg_database where datname = current_database())`;
  const port = rows[0]?.client_port;
  if (!port) return undefined;
  return replicas.find((replica) => replica.process && localPortsOf(replica.process.pid).has(port));
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
