import { AsyncLocalStorage } from "node:async_hooks";

const clients = new AsyncLocalStorage<string>();

/**
 * Runs a request's handling knowing who asks (`claimClient`), for surfaces whose protocol SDK
 * calls our code without the HTTP request (MCP tools, the A2A executor): the claims they create
 * are counted against the client like a REST client's.
 */
export function runAsClient<T>(client: string, handle: () => T): T {
  return clients.run(client, handle);
}

/** The client of the request being handled, if a surface said (`runAsClient`). */
export function currentClient(): string | undefined {
  return clients.getStore();
}
