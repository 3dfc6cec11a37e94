import type { RequestHandler } from "express";
import { problemFor, sendProblem } from "../problem.ts";

/**
 * The forms of the pages for people (api/pages) post `application/x-www-form-urlencoded` here,
 * and only here; those routes check and parse their bodies themselves.
 */
const PAGE_FORM_POSTS = /^\/(?:claims|verify)\/?$/i;

/** What nearly every write sends, known good without parsing the header (anything else is). */
const PLAIN_JSON = new Set(["application/json", "application/json; charset=utf-8"]);

/** A body on a write must be JSON: anything else is a 415 before any parser sees it. */
export function requireJson(): RequestHandler {
  return (request, response, next) => {
    if (request.method === "POST" && PAGE_FORM_POSTS.test(request.path)) return next();
    const hasBody =
      Number(request.headers["content-length"] ?? 0) > 0 || request.headers["transfer-encoding"];
    if (
      ["POST", "PUT", "PATCH"].includes(request.method) &&
      hasBody &&
      !PLAIN_JSON.has(request.headers["content-type"]?.toLowerCase() ?? "") &&
      !request.is("application/json")
    ) {
      return sendProblem(response, problemFor("unsupported_media_type"));
    }
    next();
  };
}
