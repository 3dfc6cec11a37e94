import type { Router } from "express";
import { layersOf, type RouterLayer, servesPath } from "./routerLayers.ts";

/**
 * The methods the surfaces' routes answer for `path` (e.g. `["GET", "HEAD"]`), found by walking
 * the routers as Express would. Empty when no route matches: the path is unknown (404) —
 * or served by a mounted handler rather than a route, which answers for itself.
 */
export function routeMethods(routers: Router[], path: string): string[] {
  const found = new Set<string>();
  for (const router of routers) collect(layersOf(router), path, found);
  if (found.has("GET")) found.add("HEAD");
  return [...found].sort();
}

function collect(stack: RouterLayer[], path: string, found: Set<string>): void {
  for (const layer of stack) {
    // An undecodable parameter: no route takes it.
    const match = servesPath(layer, path, false);
    if (typeof match !== "object") continue;
    if (layer.route) {
      for (const [method, handled] of Object.entries(layer.route.methods)) {
        if (handled && method !== "_all") found.add(method.toUpperCase());
      }
    } else if (Array.isArray(layer.handle?.stack)) {
      collect(layer.handle.stack, path.slice(match.path.length) || "/", found);
    }
  }
}
