import type { Router } from "express";

/** The parts of Express 5's router layers read here (router 2.x). */
export interface RouterLayer {
  match(path: string): false | { path: string };
  route?: { methods: Record<string, boolean | undefined> };
  handle?: { stack?: RouterLayer[]; length?: number };
}

export function layersOf(router: Router): RouterLayer[] {
  return (router as unknown as { stack: RouterLayer[] }).stack;
}

/**
 * Whether `layer` serves `path`: a route or a mounted handler for it. Error handlers (four
 * arguments) serve no path of their own. A parameter that cannot be decoded makes `match` throw:
 * `undecodable` says what that counts as (Express itself answers such a request 400 when it
 * tries the layer).
 */
export function servesPath(
  layer: RouterLayer,
  path: string,
  undecodable: boolean,
): boolean | { path: string } {
  if (!layer.route && layer.handle?.length === 4) return false;
  try {
    return layer.match(path);
  } catch {
    return undecodable;
  }
}
