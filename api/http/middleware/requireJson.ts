import type { RequestHandler } from "express";
import { problem, sendProblem } from "../problem.ts";

/** A body on a write must be JSON: anything else is a 415 before any parser sees it. */
export function requireJson(): RequestHandler {
  return (request, response, next) => {
    const hasBody =
      Number(request.headers["content-length"] ?? 0) > 0 || request.headers["transfer-encoding"];
    if (
      ["POST", "PUT", "PATCH"].includes(request.method) &&
      hasBody &&
      !request.is("application/json")
    ) {
      return sendProblem(
        response,
        problem("unsupported_media_type", 415, "The body must be application/json"),
      );
    }
    next();
  };
}
