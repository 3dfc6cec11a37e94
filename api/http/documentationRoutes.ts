import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { renderLlmsTxt } from "../offer/renderLlmsTxt.ts";
import { buildOpenApiDocument } from "../openapi/buildOpenApiDocument.ts";
import { DOCS_PAGE_CSP, renderDocsPage } from "../openapi/renderDocsPage.ts";

/** /openapi.json, /docs and /llms.txt: built once from the schemas and the offer. */
export function documentationRoutes({ core, config }: SurfaceContext): Router {
  const router = Router();
  const document = buildOpenApiDocument(config);
  const documentJson = JSON.stringify(document);
  const docsPage = renderDocsPage(document);
  const llmsTxt = renderLlmsTxt(core.offer);

  router.get("/openapi.json", (_request, response) => {
    response
      .set("cache-control", "public, max-age=300")
      .type("application/json")
      .send(documentJson);
  });
  router.get("/docs", (_request, response) => {
    response
      .set("content-security-policy", DOCS_PAGE_CSP)
      .set("cache-control", "public, max-age=300")
      .type("html")
      .send(docsPage);
  });
  router.get("/llms.txt", (_request, response) => {
    response
      .set("cache-control", "public, max-age=300")
      .type("text/plain; charset=utf-8")
      .send(llmsTxt);
  });
  return router;
}
