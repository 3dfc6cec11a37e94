import type { AddressInfo } from "node:net";
import { createServer, type Socket } from "node:net";

/**
 * A TCP port that accepts connections and never answers: a hung database or RPC, the case
 * timeouts exist for (a closed port fails fast and proves nothing about them).
 */
export async function startBlackHole() {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
