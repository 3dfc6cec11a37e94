import { createServer } from "node:net";

/** Resolves when nothing listens on `port`; otherwise rejects with what to change. */
export function assertPortFree(port: number, what: string, setting: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        new Error(
          error.code === "EADDRINUSE"
            ? `Port ${port} (${what}) is already in use: stop what uses it or set ${setting}.`
            : `Port ${port} (${what}) cannot be used: ${error.message}`,
        ),
      );
    });
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve()));
  });
}
