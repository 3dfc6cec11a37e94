import { Readable } from "node:stream";
import { createMcpHandler } from "@modelcontextprotocol/server";
import { type Request, Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { claimClient } from "../rateLimits/clientAddress.ts";
import { agentHostGuard } from "../web/middleware/agentHosts.ts";
import { runAsClient } from "../web/requestClient.ts";
import { createMcpServer } from "./mcpServer.ts";

/** Headers not to copy onto the web Request: the body is re-serialized from the parsed one. */
const HOP_HEADERS = new Set(["host", "content-length", "connection", "transfer-encoding"]);

function webRequest(request: Request, publicUrl: string, signal: AbortSignal): globalThis.Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (HOP_HEADERS.has(name) || value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return new globalThis.Request(`${publicUrl}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify(request.body ?? null),
    signal,
  });
}

/**
 * MCP over streamable HTTP at POST /mcp, stateless: the SDK's handler builds a new server (and
 * transport) for every request from `createMcpServer`, so nothing is shared between requests,
 * clients or replicas. It serves the 2026-07-28 revision (`server/discover`, per-request
 * `_meta`) and, for clients that open with `initialize`, the 2025 ones. Host and Origin are
 * checked first (DNS rebinding); GET and DELETE (2025 sessions) answer 405 via the fallbacks.
 */
export function mcpRoutes(context: SurfaceContext): Router {
  const { core, config, logger } = context;
  const handler = createMcpHandler(() => createMcpServer(core), {
    onerror: (error) => logger.warn({ err: error }, "mcp request failed"),
  });
  const router = Router();
  router.use("/mcp", agentHostGuard(config));
  router.post("/mcp", async (request, response) => {
    const aborted = new AbortController();
    response.on("close", () => {
      if (!response.writableFinished) aborted.abort();
    });
    // The tools create claims without the HTTP request: they learn the client from here.
    const answer = await runAsClient(claimClient(request.ip), () =>
      handler.fetch(webRequest(request, config.http.publicUrl, aborted.signal), {
        parsedBody: request.body,
      }),
    );
    response.status(answer.status);
    answer.headers.forEach((value, name) => {
      response.setHeader(name, value);
    });
    if (!answer.body) return response.end();
    Readable.fromWeb(answer.body as import("node:stream/web").ReadableStream).pipe(response);
  });
  return router;
}
