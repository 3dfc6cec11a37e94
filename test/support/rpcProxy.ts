import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/** One JSON-RPC call as the proxy saw it (each element of a batch is a call). */
export interface RpcCall {
  method: string;
  params: unknown[];
}

/**
 * What to do with one call: pass it on (the default), answer it with an error without passing
 * it on, pass it on and then answer with an error anyway (the node took it; the client thinks
 * it failed: the worst case for anything that sends money), hold the answer back a while, pass
 * it on and close the connection without an answer (the response lost on the way back), or
 * answer nothing for `ms` and then close the connection (a timeout; the node never saw it), or
 * hold the call until a test says so (`until` settles), then pass it on: an interleaving made
 * on purpose rather than hoped for; or answer `result` without passing it on (a node that is
 * behind: `null` for a receipt it does not have yet); or pass it on and `change` the node's
 * result (a provider that cuts an answer short without saying so).
 * A dropped or timed-out call takes the whole HTTP request with it (a batch included).
 */
export type RpcFault =
  | { kind: "pass" }
  | { kind: "error"; message: string }
  | { kind: "error_after_forwarding"; message: string }
  | { kind: "delay"; ms: number }
  | { kind: "drop_response" }
  | { kind: "timeout"; ms: number }
  | { kind: "hold"; until: Promise<void> }
  | { kind: "answer"; result: unknown }
  | { kind: "rewrite"; change: (result: unknown) => unknown };

/** Returned in place of an answer: the HTTP request must end without one. */
const NO_ANSWER = Symbol("no answer");

/** The whole proxy: pass requests on, hang (accept and never answer), or fail (HTTP 500). */
export type ProxyMode = "pass" | "hang" | "fail";

interface JsonRpcRequest {
  jsonrpc: "2.0";
  id: unknown;
  method: string;
  params?: unknown[];
}

/**
 * A JSON-RPC proxy of the tests' own in front of Anvil: it forwards every POST, whatever its
 * path (so a URL can carry a fake provider key in its path and still work), records and counts
 * the calls, and injects faults per call (`rule`) or for everything (`setMode`). Batches are
 * split, each call ruled on, and answered as a batch again.
 */
export async function startRpcProxy(upstream: string) {
  const calls: RpcCall[] = [];
  const sockets = new Set<Socket>();
  const hung = new Set<ServerResponse>();
  let mode: ProxyMode = "pass";

  async function forward(request: JsonRpcRequest): Promise<unknown> {
    const response = await fetch(upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
    });
    return response.json();
  }

  async function handleOne(request: JsonRpcRequest): Promise<unknown | typeof NO_ANSWER> {
    const fault = proxy.rule({ method: request.method, params: request.params ?? [] });
    const failure = (message: string) => ({
      jsonrpc: "2.0",
      id: request.id,
      error: { code: -32000, message },
    });
    switch (fault.kind) {
      case "error":
        return failure(fault.message);
      case "error_after_forwarding":
        await forward(request);
        return failure(fault.message);
      case "delay":
        await new Promise((resolve) => setTimeout(resolve, fault.ms));
        return forward(request);
      case "drop_response":
        await forward(request);
        return NO_ANSWER;
      case "timeout":
        await new Promise((resolve) => setTimeout(resolve, fault.ms));
        return NO_ANSWER;
      case "hold":
        await fault.until;
        return forward(request);
      case "answer":
        return { jsonrpc: "2.0", id: request.id, result: fault.result };
      case "rewrite": {
        const answer = (await forward(request)) as { result?: unknown };
        return "result" in answer ? { ...answer, result: fault.change(answer.result) } : answer;
      }
      default:
        return forward(request);
    }
  }

  const server = createServer(async (incoming: IncomingMessage, outgoing: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of incoming) chunks.push(chunk as Buffer);
    let body: JsonRpcRequest | JsonRpcRequest[];
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      calls.push({ method: "(unparsable)", params: [] });
      outgoing.writeHead(400, { "content-type": "text/plain" }).end("not JSON");
      return;
    }
    for (const call of Array.isArray(body) ? body : [body]) {
      calls.push({ method: String(call?.method), params: call?.params ?? [] });
    }
    if (mode === "hang") {
      hung.add(outgoing);
      return;
    }
    if (mode === "fail") {
      outgoing.writeHead(500, { "content-type": "text/plain" }).end("proxy told to fail");
      return;
    }
    try {
      const answer = Array.isArray(body)
        ? await Promise.all(body.map(handleOne))
        : await handleOne(body);
      if (answer === NO_ANSWER || (Array.isArray(answer) && answer.includes(NO_ANSWER))) {
        outgoing.destroy();
        return;
      }
      outgoing.writeHead(200, { "content-type": "application/json" });
      outgoing.end(JSON.stringify(answer));
    } catch (error) {
      outgoing.writeHead(502, { "content-type": "text/plain" }).end(String(error));
    }
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  const proxy = {
    port,
    /** The proxy's base address; any path works. */
    url: `http://127.0.0.1:${port}`,
    /** Every call seen, in order. */
    calls,
    /** Decides per call; replace it at any time. */
    rule: (_call: RpcCall): RpcFault => ({ kind: "pass" }),
    /** Calls so far, all methods, or one method. */
    count(method?: string): number {
      return method ? calls.filter((call) => call.method === method).length : calls.length;
    },
    byMethod(): Record<string, number> {
      const counts: Record<string, number> = {};
      for (const call of calls) counts[call.method] = (counts[call.method] ?? 0) + 1;
      return counts;
    },
    reset(): void {
      calls.length = 0;
    },
    setMode(next: ProxyMode): void {
      mode = next;
      if (next !== "hang") {
        for (const response of hung) response.destroy();
        hung.clear();
      }
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  return proxy;
}

export type RpcProxy = Awaited<ReturnType<typeof startRpcProxy>>;
