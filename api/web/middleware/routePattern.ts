import type { Request } from "express";

/**
 * The route a request matched as its pattern (`/api/claims/:claimId`), never the raw path:
 * a label for metrics and logs that cannot grow with the ids clients send. Read it once the
 * response is done, when Express has set `request.route`.
 */
export function routePattern(request: Request): string {
  const route = request.route as { path?: unknown } | undefined;
  if (route) {
    return `${request.baseUrl}${typeof route.path === "string" ? route.path : "(pattern)"}`;
  }
  // A surface mounted as middleware (`router.use("/graphql", handler)`) that answered itself:
  // its mount path, which is static here.
  if (request.baseUrl) return request.baseUrl;
  return "(unmatched)";
}
