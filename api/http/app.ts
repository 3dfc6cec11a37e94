import express, { type ErrorRequestHandler, type Express, type Router } from "express";
import type { Logger } from "../logger.ts";
import { problem, sendProblem } from "./problem.ts";

/** The HTTP surface: each router is one surface; this file only wires them and the fallbacks. */
export function createApp(routers: Router[], logger: Logger): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", false);
  app.use((request, response, next) => {
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
  });
  // strict: false lets any JSON through the parser, so a valid but non-object body gets the
  // precise "must be a JSON object" error instead of "malformed JSON".
  app.use(express.json({ limit: "16kb", strict: false }));
  for (const router of routers) app.use(router);

  app.use((request, response) => {
    sendProblem(
      response,
      problem("not_found", 404, "Not found", {
        detail: `No route for ${request.method} ${request.path}`,
      }),
    );
  });

  const onError: ErrorRequestHandler = (error, request, response, _next) => {
    const status = (error as { status?: number }).status;
    const type = (error as { type?: string }).type;
    if (type === "entity.parse.failed") {
      return sendProblem(response, problem("malformed_json", 400, "The body is not valid JSON"));
    }
    if (type === "entity.too.large") {
      return sendProblem(response, problem("body_too_large", 413, "The body is too large"));
    }
    if (status && status >= 400 && status < 500) {
      return sendProblem(response, problem("bad_request", status, "The request is not valid"));
    }
    logger.error({ err: error, method: request.method, path: request.path }, "unhandled error");
    sendProblem(response, problem("internal_error", 500, "Something went wrong on our side"));
  };
  app.use(onError);
  return app;
}
