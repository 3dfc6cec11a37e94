import type { RequestHandler, Router } from "express";
import { memoByPath } from "./memoByPath.ts";
import { layersOf, servesPath } from "./routerLayers.ts";

/**
 * Hands a request to the surfaces (one router each) that have a route or mounted handler for its
 * path, in order, and to none of the others. Mounting each router with `app.use` would enter every
 * one in turn, and Express 5's router leaves a router that did not answer through `setImmediate`: a
 * request for the tenth surface waited for nine turns of the event loop (a sixth of the service's
 * CPU under load went to those turns, BENCHMARKS.md#http-routes). An error a surface passes on
 * goes to the app's handlers, never into another surface. Which surfaces serve a path is worked out
 * once per path (each layer's pattern tried against it: a dozen regular expressions for a path
 * served by a late surface) and remembered.
 */
export function dispatchToSurfaces(routers: Router[]): RequestHandler {
  const surfaces = routers.map((router) => ({ router, layers: layersOf(router) }));
  const servingSurfaces = memoByPath((path) =>
    surfaces.filter((surface) => surface.layers.some((layer) => servesPath(layer, path, true))),
  );
  return (request, response, next) => {
    const serving = servingSurfaces(request.path);
    let index = 0;
    const tryNext = (error?: unknown): void => {
      if (error !== undefined && error !== null && error !== "router") {
        next(error);
        return;
      }
      const surface = serving[index++];
      if (surface) surface.router(request, response, tryNext);
      else next();
    };
    tryNext();
  };
}
