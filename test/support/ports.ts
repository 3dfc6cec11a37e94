import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";

/**
 * A port nothing listens on right now, picked below the range the OS takes outgoing connections'
 * local ports from (32768–60999 on Linux). A port the OS picks for us comes from that range, and
 * by the time the server it was picked for listens, any of the connections the test processes
 * keep opening may hold it (docs/traps.md#ponder). Below it, only another listener can.
 */
export async function freePort(): Promise<number> {
  const below = EPHEMERAL_PORTS_FROM;
  // Room for the port and the one after it (where Ponder moves when its own is taken), both
  // below the range; none where the range starts too low, and the OS picks.
  const among = Math.min(12_000, below - 1_026);
  for (let attempt = 0; among > 0 && attempt < 20; attempt++) {
    const port = below - 2 - Math.floor(Math.random() * among);
    if (await isFree(port)) return port;
  }
  return listenedOn(0);
}

/** The first port of the OS's ephemeral range (Linux's default where it cannot be read). */
const EPHEMERAL_PORTS_FROM = ephemeralPortsFrom();

function ephemeralPortsFrom(): number {
  try {
    const [from] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/);
    const port = Number(from);
    return Number.isInteger(port) && port > 0 ? port : 32_768;
  } catch {
    return 32_768;
  }
}

async function isFree(port: number): Promise<boolean> {
  const server = createServer();
  if (!(await listenOn(server, port))) return false;
  await new Promise((resolve) => server.close(resolve));
  return true;
}

/** Whether `server` now listens on `port` (false: it was taken); on 127.0.0.1. */
export function listenOn(server: Server, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const failed = () => resolve(false);
    server.once("error", failed);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", failed);
      resolve(true);
    });
  });
}

/** Listens on `port` (0: one the OS picks) and closes again; the port it listened on. */
function listenedOn(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      const listened = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(listened));
    });
  });
}
