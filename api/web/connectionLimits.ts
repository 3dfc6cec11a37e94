import type { Server } from "node:http";
import { BlockList, isIPv6 } from "node:net";
import type { Logger } from "../logger.ts";
import { clientAddress } from "../rateLimits/clientAddress.ts";

/** TRUST_PROXY's named ranges, as Express reads them. */
const NAMED_RANGES: Record<string, [string, number, "ipv4" | "ipv6"][]> = {
  loopback: [
    ["127.0.0.0", 8, "ipv4"],
    ["::1", 128, "ipv6"],
  ],
  linklocal: [
    ["169.254.0.0", 16, "ipv4"],
    ["fe80::", 10, "ipv6"],
  ],
  uniquelocal: [
    ["10.0.0.0", 8, "ipv4"],
    ["172.16.0.0", 12, "ipv4"],
    ["192.168.0.0", 16, "ipv4"],
    ["fc00::", 7, "ipv6"],
  ],
};

/**
 * Connections a stranger can hold: a socket with no traffic either way for `idleMs` while a
 * request or its answer is under way is closed (a client gone quiet mid-request, or that stopped
 * reading its answer; between requests HTTP_KEEP_ALIVE_TIMEOUT_MS applies), and one client address (an IPv6 client by its /64) holds at most `perAddress` connections at
 * once; more are closed as they open. A trusted proxy (TRUST_PROXY's addresses) speaks for many
 * clients and is not capped; with TRUST_PROXY a number of hops, any peer may be the proxy, so the
 * cap is off and HTTP_MAX_CONNECTIONS alone bounds them. 0 turns the cap off.
 */
export function limitConnections(
  server: Server,
  options: { idleMs: number; perAddress: number; trustProxy: false | number | string[] },
  logger: Logger,
): void {
  // With no 'timeout' listener on the server, Node destroys the idle socket.
  server.setTimeout(options.idleMs);
  if (options.perAddress === 0 || typeof options.trustProxy === "number") return;
  const proxies = proxyList(options.trustProxy || []);
  const open = new Map<string, number>();
  let refusedSinceLog = 0;
  server.on("connection", (socket) => {
    const peer = socket.remoteAddress ?? "";
    const plain = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(peer)?.[1] ?? peer;
    if (plain && proxies.check(plain, isIPv6(plain) ? "ipv6" : "ipv4")) return;
    const key = clientAddress(peer);
    const count = (open.get(key) ?? 0) + 1;
    if (count > options.perAddress) {
      socket.destroy();
      if (refusedSinceLog++ === 0) {
        logger.warn(
          { client: key },
          "connection refused: the client holds HTTP_CONNECTIONS_PER_IP",
        );
        setTimeout(() => {
          refusedSinceLog = 0;
        }, 10_000).unref();
      }
      return;
    }
    open.set(key, count);
    socket.once("close", () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    });
  });
}

function proxyList(entries: string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const named = NAMED_RANGES[entry];
    if (named) {
      for (const [network, prefix, family] of named) list.addSubnet(network, prefix, family);
      continue;
    }
    const [address = "", prefix] = entry.split("/");
    const family = isIPv6(address) ? "ipv6" : "ipv4";
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  return list;
}
