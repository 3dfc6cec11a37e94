import type { RequestHandler, Router } from "express";
import { problemFor, sendProblem } from "../problem.ts";
import { routeMethods } from "./routeMethods.ts";

/**
 * OPTIONS on a path that is not public (public ones are answered by `cors`): 204 with the
 * methods its routes answer, so no surface needs to handle OPTIONS itself.
 */
export function answerOptions(routers: Router[]): RequestHandler {
  return (request, response, next) => {
    if (request.method !== "OPTIONS") return next();
    const methods = routeMethods(routers, request.path);
    if (methods.length === 0) return next();
    response.setHeader("Allow", [...methods, "OPTIONS"].join(", "));
    response.status(204).end();
  };
}

/** After every router: 405 when the path exists for other methods, else 404; both problems. */
export function notFound(routers: Router[]): RequestHandler {
  return (request, response) => {
    const methods = routeMethods(routers, request.path);
    if (methods.length > 0) {
      response.setHeader("Allow", [...methods, "OPTIONS"].join(", "));
      return sendProblem(
        response,
        problemFor("method_not_allowed", {
          detail: `${request.method} is not allowed on this path; use ${methods.join(", ")}.`,
        }),
      );
    }
    sendProblem(
      response,
      problemFor("not_found", {
        detail: `No route for ${request.method} ${request.path}`,
      }),
    );
  };
}
