import { createHash } from "node:crypto";
import type { Request, Response } from "express";

/**
 * An answer whose status, headers and body are known before the request arrives (the offer, the
 * unpaid 402, the ledger's shared first page as JSON and as HTML): built once, then only written
 * out. Express's `res.send` would, on every request, turn a body over 1 kB into a Buffer and hash
 * it for an ETag; in `node --cpu-prof` profiles under load that was a fifth of the service's CPU
 * on these routes (BENCHMARKS.md#http-routes).
 */
export interface PrebuiltAnswer {
  status: number;
  /**
   * Encoded once: a page with any character beyond Latin-1 is a two-byte string that Node would
   * otherwise encode to UTF-8 again on every write.
   */
  body: Buffer;
  /** Set when the answer may be revalidated: a matching If-None-Match gets a 304. */
  etag?: string;
  headers: Record<string, string>;
}

export function prebuildAnswer(options: {
  body: string;
  contentType: string;
  cacheControl: string;
  status?: number;
  /** An ETag for revalidation (GET answers a client may keep). */
  etag?: boolean;
  headers?: Record<string, string>;
}): PrebuiltAnswer {
  const etag = options.etag ? weakEtag(options.body) : undefined;
  const body = Buffer.from(options.body, "utf8");
  return {
    status: options.status ?? 200,
    body,
    etag,
    headers: {
      ...options.headers,
      "Cache-Control": options.cacheControl,
      "Content-Type": options.contentType,
      "Content-Length": String(body.byteLength),
      ...(etag ? { ETag: etag } : {}),
    },
  };
}

/** A JSON document as a prebuilt 200 with an ETag. */
export function prebuildJson(value: unknown, cacheControl: string): PrebuiltAnswer {
  return prebuildAnswer({
    body: JSON.stringify(value),
    contentType: "application/json; charset=utf-8",
    cacheControl,
    etag: true,
  });
}

/**
 * Writes the answer: a 304 when the client already holds it (Express's own freshness rules:
 * `If-None-Match`, unless the request says `Cache-Control: no-cache`), else status, headers and
 * body in one `writeHead` and `end` (HEAD gets no body: Node leaves it out).
 */
export function sendPrebuilt(request: Request, response: Response, answer: PrebuiltAnswer): void {
  if (answer.etag && request.headers["if-none-match"]) {
    response.setHeader("ETag", answer.etag);
    response.setHeader("Cache-Control", answer.headers["Cache-Control"] as string);
    if (request.fresh) {
      response.writeHead(304);
      response.end();
      return;
    }
  }
  response.writeHead(answer.status, answer.headers);
  response.end(answer.body);
}

/** Express's own ETag form (`W/"<length hex>-<sha1 base64, 27 chars>"`). */
function weakEtag(body: string): string {
  const digest = createHash("sha1").update(body, "utf8").digest("base64").slice(0, 27);
  return `W/"${Buffer.byteLength(body).toString(16)}-${digest}"`;
}
