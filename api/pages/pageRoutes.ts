import express, { type ErrorRequestHandler, Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { html } from "../html/safeHtml.ts";
import { ledgerEntryView, ledgerPageLink } from "../ledger/ledgerView.ts";
import type { LedgerPage } from "../ledger/listLedgerEntries.ts";
import type { LedgerTotals } from "../ledger/readLedgerStats.ts";
import { requestIdOf } from "../web/middleware/observeRequests.ts";
import {
  type PrebuiltAnswer,
  prebuildAnswer,
  prebuildJson,
  sendPrebuilt,
} from "../web/prebuiltAnswer.ts";
import { claimPages } from "./claimPages.ts";
import { FAVICON_SVG } from "./layout.ts";
import {
  answerProblem,
  formBodiesOnly,
  prebuildPage,
  sameSiteForms,
  sendPage,
  wantsJson,
} from "./pageResponses.ts";
import { paymentPages } from "./paymentPages.ts";
import { intakeMailbox, renderHomePage } from "./renderHomePage.ts";
import { renderLedgerErrorPage, renderLedgerPage } from "./renderLedgerPage.ts";
import { verifyPages } from "./verifyPages.ts";

/**
 * The pages for people: server-rendered HTML over the same use-cases as the API, one layout
 * (api/pages/layout.ts), no framework. The forms are plain HTML forms (they work without
 * JavaScript) and post `application/x-www-form-urlencoded` to /claims and /verify, the only
 * paths of the service that take it (api/web/middleware/requireJson.ts lets them through).
 */
export function pageRoutes(context: SurfaceContext): Router {
  const { core, config, logger } = context;
  const serviceName = config.serviceName;
  const mailEnabled = intakeMailbox(core.offer) !== null;
  const router = Router();
  const claims = claimPages(context, mailEnabled);
  const verify = verifyPages(context);
  const payments = paymentPages(context);
  // The same size limit as the JSON bodies; a form has a handful of fields.
  const form = [
    sameSiteForms(serviceName),
    formBodiesOnly(serviceName),
    express.urlencoded({ extended: false, limit: "16kb", parameterLimit: 20 }),
  ];

  const offerJson = prebuildJson(core.offer, "public, max-age=60");
  const favicon = prebuildAnswer({
    body: FAVICON_SVG,
    contentType: "image/svg+xml",
    cacheControl: "public, max-age=86400",
    etag: true,
  });

  router.get("/", async (request, response) => {
    response.vary("Accept");
    if (wantsJson(request)) return sendPrebuilt(request, response, offerJson);
    const [totals, latest] = await Promise.all([
      core.ledgerTotals(),
      core.listLedger({ limit: "3" }),
    ]);
    sendPage(
      response,
      renderHomePage({
        offer: core.offer,
        totals,
        latest:
          latest.type === "page"
            ? latest.page.entries.map((entry) => ledgerEntryView(config, entry))
            : [],
        x402Enabled: config.x402.facilitator !== "off",
        form: { values: {}, errors: [], mailEnabled },
      }),
      { cache: "no-cache" },
    );
  });

  router.get("/favicon.svg", (request, response) => sendPrebuilt(request, response, favicon));

  router.get("/claims", (_request, response) => response.redirect(303, "/#start"));
  router.post("/claims", ...form, claims.createFromForm);
  router.get("/claims/:claimId", claims.showClaim);

  router.get("/verify", verify.showChecker);
  router.post("/verify", ...form, verify.checkPasted);

  router.get("/payments", payments.search);
  router.get("/payments/:txHash", payments.explain);

  // The unfiltered first page and the totals are each one shared object until a claim completes
  // (api/ledger/cachedFirstPages.ts, cachedLedgerStats.ts): the page made of them is rendered
  // once, not on every view. Any other page is a new object, rendered once.
  const renderedLedgers = new WeakMap<
    LedgerPage,
    { totals: LedgerTotals; answer: PrebuiltAnswer }
  >();
  router.get("/ledger", async (request, response) => {
    // An empty form field means "no filter" to a person, not "an empty agent name".
    const given = Object.fromEntries(
      Object.entries(request.query).filter(([, value]) => value !== ""),
    );
    const [result, totals] = await Promise.all([core.listLedger(given), core.ledgerTotals()]);
    if (result.type !== "page") {
      return sendPage(
        response,
        renderLedgerErrorPage(
          serviceName,
          result.type,
          "The address asks for something the ledger cannot show.",
          result.errors.map((error) => `${error.field || "query"}: ${error.message}`),
        ),
        { status: 400 },
      );
    }
    const { query, page } = result;
    const rendered = renderedLedgers.get(page);
    if (rendered?.totals === totals) return sendPrebuilt(request, response, rendered.answer);
    const ledgerHtml = renderLedgerPage({
      serviceName,
      entries: page.entries.map((entry) => ledgerEntryView(config, entry)),
      totals,
      agentName: query.agent_name,
      links: {
        newest: query.cursor ? ledgerPageLink("/ledger", query, null) : null,
        older: page.nextCursor ? ledgerPageLink("/ledger", query, page.nextCursor) : null,
      },
    });
    const answer = prebuildPage(ledgerHtml, { cache: "no-cache" });
    renderedLedgers.set(page, { totals, answer });
    sendPrebuilt(request, response, answer);
  });

  /**
   * Errors of these routes, as pages: a form body too large or unreadable is the sender's
   * (4xx, the catalog's words); anything else is logged and answered with the request id only.
   */
  const pageErrors: ErrorRequestHandler = (error, request, response, next) => {
    if (response.headersSent) return next(error);
    const { status, type } = error as { status?: unknown; type?: unknown };
    if (type === "entity.too.large") {
      return answerProblem(request, response, serviceName, "body_too_large");
    }
    if (typeof status === "number" && status >= 400 && status < 500) {
      return answerProblem(request, response, serviceName, "bad_request");
    }
    logger.error({ err: error, method: request.method, path: request.path }, "page failed");
    const requestId = requestIdOf(response) ?? "unknown";
    answerProblem(request, response, serviceName, "internal_error", {
      requestId,
      next: html`<p>Request id: <code>${requestId}</code></p><p><a href="/">Home</a></p>`,
    });
  };
  router.use(pageErrors);

  return router;
}
