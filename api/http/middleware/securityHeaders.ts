import type { OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { RequestHandler } from "express";

/** JSON, text and problems load nothing and are never framed. */
const API_POLICY = "default-src 'none'; frame-ancestors 'none'";
/**
 * An HTML page that set no policy of its own still may not be framed or rebase its links;
 * the rest is its owner's to decide (routes that serve HTML set their own policy).
 */
const HTML_BASELINE_POLICY = "frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/**
 * Security headers on every response. The Content-Security-Policy is added when the headers
 * are written, and only if the route has not set one: a route's own policy always wins.
 */
export function securityHeaders(options: { hsts: boolean }): RequestHandler {
  return (_request, response, next) => {
    response.setHeader("X-Content-Type-Options", "nosniff");
    response.setHeader("X-Frame-Options", "DENY");
    response.setHeader("Referrer-Policy", "no-referrer");
    response.setHeader("Cross-Origin-Opener-Policy", "same-origin");
    // Over https only (PUBLIC_URL): browsers ignore it on http, and a devnet must stay reachable.
    if (options.hsts) response.setHeader("Strict-Transport-Security", "max-age=31536000");
    beforeHeadersAreWritten(response, (headers) => {
      if (
        response.hasHeader("content-security-policy") ||
        headerIn(headers, "content-security-policy")
      ) {
        return;
      }
      const contentType = String(
        headerIn(headers, "content-type") ?? response.getHeader("content-type") ?? "",
      );
      response.setHeader(
        "Content-Security-Policy",
        /^text\/html\b/i.test(contentType) ? HTML_BASELINE_POLICY : API_POLICY,
      );
    });
    next();
  };
}

/**
 * Runs `hook` just before the status line and headers go out, whoever writes them (`send`,
 * `json`, `end`, a streaming surface): every path ends in `writeHead`.
 */
function beforeHeadersAreWritten(
  response: ServerResponse,
  hook: (headersGiven: OutgoingHttpHeaders | undefined) => void,
): void {
  const writeHead = response.writeHead;
  let done = false;
  response.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    if (!done) {
      done = true;
      const given = args.find(
        (arg) => typeof arg === "object" && arg !== null && !Array.isArray(arg),
      );
      hook(given as OutgoingHttpHeaders | undefined);
    }
    return (writeHead as (...all: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse["writeHead"];
}

function headerIn(headers: OutgoingHttpHeaders | undefined, name: string): unknown {
  if (!headers) return undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return value;
  }
  return undefined;
}
