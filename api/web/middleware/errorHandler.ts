import type { ErrorRequestHandler } from "express";
import { isRpcUnavailable } from "../../chain/rpcUnavailable.ts";
import { isDatabaseTimeout, isDatabaseUnavailable } from "../../db/sqlState.ts";
import type { Logger } from "../../logger.ts";
import { problemFor, sendProblem } from "../problem.ts";
import { MAX_JSON_DEPTH, TOO_DEEP } from "./jsonDepth.ts";
import { isJsonRpcPath, JSON_RPC, sendJsonRpcError } from "./jsonRpcErrors.ts";
import { requestIdOf } from "./observeRequests.ts";

/**
 * The last handler: anything thrown or rejected by a route or middleware becomes a problem.
 * Client errors say what was wrong; anything else is a 500 whose body holds only the request
 * id (the stack and the error's own words go to the log, under the same id).
 */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, request, response, _next) => {
    const { status, type } = error as { status?: unknown; type?: unknown };
    if (response.headersSent) {
      logger.error(
        { err: error, method: request.method, path: request.path },
        "error mid-response",
      );
      response.destroy();
      return;
    }
    // MCP and A2A speak JSON-RPC: their clients read a JSON-RPC error, not a problem.
    if (isJsonRpcPath(request.path)) {
      if (type === "entity.parse.failed") {
        return sendJsonRpcError(response, 400, JSON_RPC.parseError, "Parse error: not valid JSON");
      }
      if (type === "entity.too.large") {
        return sendJsonRpcError(
          response,
          413,
          JSON_RPC.invalidRequest,
          "Request too large: at most 16 kB",
        );
      }
      if (type === TOO_DEEP) {
        return sendJsonRpcError(
          response,
          400,
          JSON_RPC.invalidRequest,
          `Invalid request: JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
        );
      }
      if (typeof status === "number" && status >= 400 && status < 500) {
        return sendJsonRpcError(response, status, JSON_RPC.invalidRequest, "Invalid request");
      }
      logger.error({ err: error, method: request.method, path: request.path }, "unhandled error");
      return sendJsonRpcError(response, 500, JSON_RPC.internalError, "Internal error", {
        request_id: requestIdOf(response),
      });
    }
    if (type === "entity.parse.failed") {
      return sendProblem(response, problemFor("malformed_json"));
    }
    if (type === "entity.too.large") {
      return sendProblem(response, problemFor("body_too_large"));
    }
    if (type === TOO_DEEP) {
      return sendProblem(
        response,
        problemFor("malformed_json", {
          detail: `The body is nested deeper than ${MAX_JSON_DEPTH} levels.`,
        }),
      );
    }
    if (type === "encoding.unsupported" || type === "charset.unsupported") {
      return sendProblem(
        response,
        problemFor("unsupported_media_type", {
          detail: "The body's encoding or charset is not supported.",
        }),
      );
    }
    const unavailable = dependencyUnavailable(error);
    if (unavailable) {
      // Retry, not a 500: nothing was half done (chain reads come before any transaction, and
      // a transaction that ran out of time was rolled back).
      logger.warn(
        { err: error, method: request.method, path: request.path },
        `${unavailable.what}; answered 503`,
      );
      response.setHeader("Retry-After", "5");
      return sendProblem(
        response,
        problemFor("temporarily_unavailable", {
          detail: `${unavailable.detail} Try again in 5 s.`,
        }),
      );
    }
    if (typeof status === "number" && status >= 400 && status < 500) {
      return sendProblem(response, { ...problemFor("bad_request"), status });
    }
    logger.error({ err: error, method: request.method, path: request.path }, "unhandled error");
    sendProblem(response, problemFor("internal_error", { request_id: requestIdOf(response) }));
  };
}

/** A dependency that was too slow or unreachable for this request, if that is what failed. */
function dependencyUnavailable(error: unknown): { what: string; detail: string } | null {
  if (isDatabaseTimeout(error) || isDatabaseUnavailable(error)) {
    // A statement, lock or transaction ran past its DATABASE_*_TIMEOUT_MS (the database is
    // overloaded or something holds what this request needs), or the database restarted or
    // cannot be reached.
    return {
      what: "database timeout or unavailable",
      detail: "The database did not answer this request in time (busy or restarting).",
    };
  }
  if (isRpcUnavailable(error)) {
    return { what: "RPC unavailable", detail: "The chain's RPC did not answer in time." };
  }
  return null;
}
