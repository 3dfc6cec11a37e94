import { Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { renderLlmsTxt } from "../offer/renderLlmsTxt.ts";
import { buildOpenApiDocument } from "../openapi/buildOpenApiDocument.ts";
import { DOCS_PAGE_CSP, renderDocsPage } from "../openapi/renderDocsPage.ts";
import { prebuildAnswer, sendPrebuilt } from "../web/prebuiltAnswer.ts";

const KEPT_FIVE_MINUTES = "public, max-age=300";

/** /openapi.json, /docs and /llms.txt: built once from the schemas and the offer. */
export function documentationRoutes({ core, config }: SurfaceContext): Router {
  const router = Router();
  const document = buildOpenApiDocument(config);
  const openApi = prebuildAnswer({
    body: JSON.stringify(document),
    contentType: "application/json; charset=utf-8",
    cacheControl: KEPT_FIVE_MINUTES,
    etag: true,
  });
  const docsPage = prebuildAnswer({
    body: renderDocsPage(document),
    contentType: "text/html; charset=utf-8",
    cacheControl: KEPT_FIVE_MINUTES,
    etag: true,
    headers: { "Content-Security-Policy": DOCS_PAGE_CSP },
  });
  const llmsTxt = prebuildAnswer({
    body: renderLlmsTxt(core.offer),
    contentType: "text/plain; charset=utf-8",
    cacheControl: KEPT_FIVE_MINUTES,
    etag: true,
  });

  router.get("/openapi.json", (request, response) => sendPrebuilt(request, response, openApi));
  router.get("/docs", (request, response) => sendPrebuilt(request, response, docsPage));
  router.get("/llms.txt", (request, response) => sendPrebuilt(request, response, llmsTxt));
  return router;
}
