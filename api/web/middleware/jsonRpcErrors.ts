import type { Response } from "express";

/** The JSON-RPC endpoints (MCP, A2A): their errors are JSON-RPC errors, not problems. */
const JSON_RPC_PATHS = /^\/(mcp|a2a)\/?$/i;

export function isJsonRpcPath(path: string): boolean {
  return JSON_RPC_PATHS.test(path);
}

/** JSON-RPC 2.0 error codes used outside any server (before a request reaches one). */
export const JSON_RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  /** The implementation-defined server error: busy, rate limited, unavailable (try again). */
  serverError: -32000,
} as const;

/** A JSON-RPC error answer with no request id (the request could not be read or is refused). */
export function sendJsonRpcError(
  response: Response,
  status: number,
  code: number,
  message: string,
  data?: Record<string, unknown>,
): void {
  response
    .status(status)
    .type("application/json")
    .send(
      JSON.stringify({
        jsonrpc: "2.0",
        id: null,
        error: { code, message, ...(data ? { data } : {}) },
      }),
    );
}
