import type { Request, RequestHandler, Response } from "express";
import { html, type SafeHtml } from "../html/safeHtml.ts";
import type { ProblemCode } from "../reasons/reasonCatalog.ts";
import { type PrebuiltAnswer, prebuildAnswer } from "../web/prebuiltAnswer.ts";
import { problemFor, sendProblem } from "../web/problem.ts";
import { pageCsp } from "./layout.ts";
import { renderProblemPage, START_A_CLAIM } from "./renderProblemPage.ts";

/** How a page answers: the HTML, its status, its policy and how long it may be kept. */
export function sendPage(
  response: Response,
  page: string,
  options: { status?: number; scriptNonce?: string; cache?: string } = {},
): void {
  response
    .status(options.status ?? 200)
    .set("content-security-policy", pageCsp({ scriptNonce: options.scriptNonce }))
    .set("cache-control", options.cache ?? "no-store")
    .type("html")
    .send(page);
}

/**
 * A page whose HTML is known before the request (the ledger's shared first page): its headers
 * are built with it, so each view only writes it out (api/web/prebuiltAnswer.ts).
 */
export function prebuildPage(page: string, options: { cache: string }): PrebuiltAnswer {
  return prebuildAnswer({
    body: page,
    contentType: "text/html; charset=utf-8",
    cacheControl: options.cache,
    headers: { "Content-Security-Policy": pageCsp({}) },
  });
}

/**
 * A client that asks for JSON (`Accept: application/json`) rather than a page: it gets the
 * API's answer (problem+json on errors). Browsers, and `*\/*`, get the page.
 */
export function wantsJson(request: Request): boolean {
  const best = request.accepts(["text/html", "application/json", "application/problem+json"]);
  return best === "application/json" || best === "application/problem+json";
}

/**
 * A problem for people (a page with the catalog's words and where to go next) or, for a client
 * that asks for JSON, the same problem as RFC 9457 problem+json.
 */
export function answerProblem(
  request: Request,
  response: Response,
  serviceName: string,
  code: ProblemCode,
  extra: {
    detail?: string;
    errors?: { field: string; message: string }[];
    requestId?: string;
    next?: SafeHtml;
  } = {},
): void {
  const { next, requestId, ...members } = extra;
  const problem = problemFor(code, {
    ...members,
    ...(requestId !== undefined ? { request_id: requestId } : {}),
  });
  if (wantsJson(request)) {
    sendProblem(response, problem);
    return;
  }
  sendPage(
    response,
    renderProblemPage({
      serviceName,
      code,
      title: problem.title,
      detail: problem.detail,
      next: next ?? START_A_CLAIM,
    }),
    { status: problem.status },
  );
}

/**
 * The forms post only from this site's own pages. There are no cookies or sessions to ride
 * (so SameSite is moot and a form token would guard nothing a browser holds); what a
 * cross-site form could do is make a visitor's browser create claims for another site, from
 * the visitor's address and against the visitor's rate limit. Browsers say where a request
 * comes from: `Sec-Fetch-Site` (every current one), else `Origin`. `Origin: null` is refused:
 * a sandboxed frame or a data: page on any site sends it, and our own pages never do (their
 * `Referrer-Policy: same-origin` lets a same-origin POST carry our origin). A request with
 * neither is not from a browser a third site could drive, and goes through.
 */
export function sameSiteForms(serviceName: string): RequestHandler {
  return (request, response, next) => {
    const site = request.get("sec-fetch-site");
    const origin = request.get("origin");
    const crossSite = site
      ? site !== "same-origin" && site !== "none"
      : origin !== undefined && (origin === "null" || originHost(origin) !== request.get("host"));
    if (!crossSite) return next();
    answerProblem(request, response, serviceName, "cross_site_form", {
      next: html`<p><a href="/">Open the home page of this service</a></p>`,
    });
  };
}

function originHost(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

/** The page forms take `application/x-www-form-urlencoded` (what a plain HTML form sends) only. */
export function formBodiesOnly(serviceName: string): RequestHandler {
  return (request, response, next) => {
    const hasBody =
      Number(request.headers["content-length"] ?? 0) > 0 || request.headers["transfer-encoding"];
    if (!hasBody || request.is("application/x-www-form-urlencoded")) return next();
    answerProblem(request, response, serviceName, "unsupported_form_type");
  };
}

/** A form field as sent: its text, the first of several, or "" when absent. */
export function fieldText(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  if (typeof value === "string") return value;
  if (Array.isArray(value) && typeof value[0] === "string") return value[0];
  return "";
}
