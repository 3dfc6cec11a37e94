import type { ErrorRequestHandler } from "express";
import type { Logger } from "../../logger.ts";
import { problem, sendProblem } from "../problem.ts";
import { requestIdOf } from "./requestId.ts";

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
    if (type === "entity.parse.failed") {
      return sendProblem(response, problem("malformed_json", 400, "The body is not valid JSON"));
    }
    if (type === "entity.too.large") {
      return sendProblem(response, problem("body_too_large", 413, "The body is too large"));
    }
    if (type === "encoding.unsupported" || type === "charset.unsupported") {
      return sendProblem(
        response,
        problem("unsupported_media_type", 415, "The body's encoding or charset is not supported"),
      );
    }
    if (typeof status === "number" && status >= 400 && status < 500) {
      return sendProblem(response, problem("bad_request", status, "The request is not valid"));
    }
    logger.error({ err: error, method: request.method, path: request.path }, "unhandled error");
    sendProblem(
      response,
      problem("internal_error", 500, "Something went wrong on our side", {
        detail: "The error is logged; quote the request_id when you report it.",
        request_id: requestIdOf(response),
      }),
    );
  };
}
