import type { RequestHandler } from "express";
import { memoByPath } from "./memoByPath.ts";

/**
 * The public routes browsers may call from any origin. All are public and use no cookies or
 * other credentials, so `*` is safe: nothing a page could read is tied to its user.
 */
const PUBLIC_ROUTES: { path: RegExp; methods: string[] }[] = [
  { path: /^\/api\/info\/?$/i, methods: ["GET"] },
  { path: /^\/api\/ledger\/?$/i, methods: ["GET"] },
  { path: /^\/api\/health\/?$/i, methods: ["GET"] },
  { path: /^\/openapi\.json$/i, methods: ["GET"] },
  { path: /^\/llms\.txt$/i, methods: ["GET"] },
  { path: /^\/graphql\/?$/i, methods: ["GET", "POST"] },
  { path: /^\/api\/claims\/?$/i, methods: ["POST"] },
  { path: /^\/api\/claims\/[^/]+\/?$/i, methods: ["GET"] },
  { path: /^\/api\/claims\/[^/]+\/receipt\/?$/i, methods: ["GET"] },
  { path: /^\/api\/claims\/[^/]+\/tx\/?$/i, methods: ["POST"] },
  { path: /^\/api\/payments\/[^/]+\/?$/i, methods: ["GET"] },
  { path: /^\/api\/receipts\/verify\/?$/i, methods: ["POST"] },
  { path: /^\/api\/x402\/earn\/?$/i, methods: ["GET", "POST"] },
  { path: /^\/\.well-known\/agent-card\.json$/i, methods: ["GET"] },
];

/** x402 answers in headers; a browser client can read only the ones exposed. */
const EXPOSED_HEADERS = "PAYMENT-REQUIRED, PAYMENT-RESPONSE, Retry-After, Location, X-Request-Id";
/**
 * The official x402 fetch client sends `Access-Control-Expose-Headers` as a request header on
 * its paid retry, so it must be allowed like the payment itself.
 */
const ALLOWED_HEADERS =
  "Content-Type, PAYMENT-SIGNATURE, Access-Control-Expose-Headers, X-Request-Id";
const PREFLIGHT_MAX_AGE_SECONDS = "7200";

export function publicMethods(path: string): string[] | undefined {
  return PUBLIC_ROUTES.find((route) => route.path.test(path))?.methods;
}

/** `publicMethods`, remembered per path: every request asks it. */
const publicMethodsOf = memoByPath(publicMethods);

/**
 * CORS for the public routes: `Access-Control-Allow-Origin: *` on their answers (errors and
 * 429s included, so a page can read them), and preflights answered 204 here.
 */
export function cors(): RequestHandler {
  return (request, response, next) => {
    const methods = publicMethodsOf(request.path);
    if (!methods) return next();
    response.setHeader("Access-Control-Allow-Origin", "*");
    if (request.method !== "OPTIONS") {
      response.setHeader("Access-Control-Expose-Headers", EXPOSED_HEADERS);
      return next();
    }
    response.setHeader("Access-Control-Allow-Methods", [...methods, "OPTIONS"].join(", "));
    response.setHeader("Access-Control-Allow-Headers", ALLOWED_HEADERS);
    response.setHeader("Access-Control-Max-Age", PREFLIGHT_MAX_AGE_SECONDS);
    response.setHeader("Allow", [...withHead(methods), "OPTIONS"].join(", "));
    response.status(204).end();
  };
}

function withHead(methods: string[]): string[] {
  return methods.includes("GET") ? [...methods, "HEAD"] : methods;
}
