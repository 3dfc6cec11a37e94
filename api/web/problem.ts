import type { Response } from "express";
import { PROBLEM_REASONS, type ProblemCode } from "../reasons/reasonCatalog.ts";
import { describeRefusal, type Refusal } from "../reasons/refusal.ts";
import { isJsonRpcPath, JSON_RPC, sendJsonRpcError } from "./middleware/jsonRpcErrors.ts";

/**
 * RFC 9457 problem details. `type` is a stable relative URI built from a catalog code
 * (`/problems/claim_not_found`); clients branch on it, never on `title` or `detail`.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  errors?: { field: string; message: string }[];
  [extension: string]: unknown;
}

/** The problem of a catalog code, with its status and title; `extra` adds detail and members. */
export function problemFor(
  code: ProblemCode,
  extra: Omit<Partial<Problem>, "type" | "status" | "title"> = {},
): Problem {
  const reason = PROBLEM_REASONS[code];
  const detail = "detail" in reason ? { detail: reason.detail as string } : {};
  return {
    type: `/problems/${code}`,
    title: reason.title,
    status: reason.status,
    ...detail,
    ...extra,
  };
}

export function sendProblem(response: Response, details: Problem): void {
  // MCP and A2A clients read JSON-RPC errors: a refusal made before their servers (a body that
  // is not JSON, a rate limit, a method other than POST) reaches them in that shape, with the
  // problem's stable type in `data`.
  // The whole path: inside a router mounted at /mcp or /a2a, `req.path` is relative to it.
  if (isJsonRpcPath(response.req.originalUrl.split("?")[0] ?? "")) {
    const { type, title, status, detail } = details;
    const code = status === 429 || status >= 500 ? JSON_RPC.serverError : JSON_RPC.invalidRequest;
    sendJsonRpcError(response, status, code, detail ? `${title}: ${detail}` : title, {
      type,
      status,
    });
    return;
  }
  response.status(details.status).type("application/problem+json").send(JSON.stringify(details));
}

/** A use-case's refusal as a problem (with Retry-After where the catalog says to wait). */
export function sendRefusal(response: Response, refusal: Refusal): void {
  const described = describeRefusal(refusal);
  if (described.retryAfterSeconds !== undefined) {
    response.set("retry-after", String(described.retryAfterSeconds));
  }
  sendProblem(
    response,
    problemFor(described.code, {
      ...(described.detail !== undefined ? { detail: described.detail } : {}),
      ...described.fields,
    }),
  );
}
