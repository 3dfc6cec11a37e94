import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/**
 * A port nothing listens on right now, picked below the range the OS takes outgoing connections'
 * local ports from (32768–60999 on Linux). A port the OS picks for us comes from that range, and
 * by the time the server it was picked for listens, any of the connections the test processes
 * keep opening may hold it (docs/traps.md#ponder). Below it, only another listener can.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = PICKED_BELOW - 1 - Math.floor(Math.random() * PICKED_AMONG);
    if (await isFree(port)) return port;
  }
  return listenedOn(0);
}

const PICKED_BELOW = ephemeralPortsFrom();
/** How many ports below the ephemeral range are picked among: enough that two picks rarely meet. */
const PICKED_AMONG = Math.min(12_000, PICKED_BELOW - 1_025);

function ephemeralPortsFrom(): number {
  try {
    const [from] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/);
    const port = Number(from);
    return Number.isInteger(port) && port > 2_048 ? port : 32_768;
  } catch {
    return 32_768;
  }
}

function isFree(port: number): Promise<boolean> {
  return listenedOn(port).then(
    () => true,
    () => false,
  );
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
