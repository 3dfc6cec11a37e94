import type { RequestHandler } from "express";

/**
 * JSON, text and problems load nothing and are never framed. Every HTML answer sets a policy of
 * its own (the pages, GraphiQL, the API reference), which replaces this one; an HTML answer that
 * forgot would get this stricter one, never none.
 */
const API_POLICY = "default-src 'none'; frame-ancestors 'none'";

/**
 * Security headers on every response, set before any route runs (a route's own
 * Content-Security-Policy replaces the default). They are the same for every request: set as
 * one list, with no per-request hook on the response.
 */
export function securityHeaders(options: { hsts: boolean }): RequestHandler {
  const headers: [string, string][] = [
    ["X-Content-Type-Options", "nosniff"],
    ["X-Frame-Options", "DENY"],
    // No referrer to other sites; same-origin requests keep theirs, so a browser without
    // Sec-Fetch-Site sends our own forms with our Origin, not "null" (pageResponses.ts).
    ["Referrer-Policy", "same-origin"],
    ["Cross-Origin-Opener-Policy", "same-origin"],
    ["Content-Security-Policy", API_POLICY],
    // Over https only (PUBLIC_URL): browsers ignore it on http, and a devnet must stay reachable.
    ...(options.hsts
      ? [["Strict-Transport-Security", "max-age=31536000"] as [string, string]]
      : []),
  ];
  return (_request, response, next) => {
    for (const [name, value] of headers) response.setHeader(name, value);
    next();
  };
}
