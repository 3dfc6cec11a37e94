import { createHash } from "node:crypto";
import type { Response } from "express";

/** A JSON answer that never changes while the process runs, serialised once. */
export interface EncodedJson {
  body: string;
  etag: string;
}

/**
 * Serialises `value` once, with its ETag, so that each request only writes it out: Express's
 * `res.json` would stringify and hash the same document again on every request (a tenth of the
 * CPU of GET /api/info under load, in a `node --cpu-prof` profile; see BENCHMARKS.md).
 */
export function encodeJson(value: unknown): EncodedJson {
  const body = JSON.stringify(value);
  const digest = createHash("sha1").update(body, "utf8").digest("base64").slice(0, 27);
  return { body, etag: `W/"${Buffer.byteLength(body).toString(16)}-${digest}"` };
}

/** Writes an encoded answer; a request that already holds its ETag gets a 304 from Express. */
export function sendEncodedJson(response: Response, encoded: EncodedJson): void {
  response.set("etag", encoded.etag).type("application/json").send(encoded.body);
}
