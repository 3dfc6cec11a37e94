import type { Express } from "express";

/** The parts of Express 5's router layers read here (router 2.x). */
interface RouterLayer {
  match(path: string): false | { path: string };
  route?: { methods: Record<string, boolean | undefined> };
  handle?: { stack?: RouterLayer[] };
}

/**
 * The methods the app's routes answer for `path` (e.g. `["GET", "HEAD"]`), found by walking
 * the routers as Express would. Empty when no route matches: the path is unknown (404) —
 * or served by a mounted handler rather than a route, which answers for itself.
 */
export function routeMethods(app: Express, path: string): string[] {
  const found = new Set<string>();
  const stack = (app.router as unknown as { stack: RouterLayer[] }).stack;
  collect(stack, path, found);
  if (found.has("GET")) found.add("HEAD");
  return [...found].sort();
}

function collect(stack: RouterLayer[], path: string, found: Set<string>): void {
  for (const layer of stack) {
    let match: false | { path: string };
    try {
      match = layer.match(path);
    } catch {
      continue; // an undecodable parameter: no route takes it
    }
    if (!match) continue;
    if (layer.route) {
      for (const [method, handled] of Object.entries(layer.route.methods)) {
        if (handled && method !== "_all") found.add(method.toUpperCase());
      }
    } else if (Array.isArray(layer.handle?.stack)) {
      collect(layer.handle.stack, path.slice(match.path.length) || "/", found);
    }
  }
}
