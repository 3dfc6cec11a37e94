import { Router } from "express";
import { buildOffer } from "../offer/buildOffer.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";

export function offerRoutes(deps: ServiceDeps): Router {
  const router = Router();
  const offer = buildOffer(deps.config);
  router.get("/api/info", (_request, response) => {
    response.set("cache-control", "public, max-age=60").json(offer);
  });
  return router;
}
