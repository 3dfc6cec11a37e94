import { randomUUID } from "node:crypto";
import type { RequestHandler, Response } from "express";
import { logContext } from "../../logger.ts";

/** What an incoming X-Request-Id may look like to be kept (a load balancer's, a client's). */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * Gives each request an id: a sane incoming `X-Request-Id`, or a new UUID. It is echoed in
 * the response header, and every log line written while the request is handled carries it as
 * `request_id` (the logger's mixin reads `logContext`).
 */
export function requestId(): RequestHandler {
  return (request, response, next) => {
    const incoming = request.get("x-request-id");
    const id = incoming && ACCEPTED_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    response.locals.requestId = id;
    response.setHeader("X-Request-Id", id);
    logContext.run({ request_id: id }, next);
  };
}

export function requestIdOf(response: Response): string | undefined {
  return response.locals.requestId as string | undefined;
}
