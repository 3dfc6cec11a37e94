import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { encodeJson, sendEncodedJson } from "./encodedJson.ts";

/** GET /api/info: the offer document. */
export function offerRoutes({ core }: SurfaceContext): Router {
  const router = Router();
  // The offer is built once per process from the configuration: so is its JSON.
  const offer = encodeJson(core.offer);
  router.get("/api/info", (_request, response) => {
    response.set("cache-control", "public, max-age=60");
    sendEncodedJson(response, offer);
  });
  return router;
}
