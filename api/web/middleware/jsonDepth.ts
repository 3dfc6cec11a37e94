import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The deepest nesting of objects and arrays a JSON body may have: far above what the official
 * clients send, an x402 payment with its extensions inside an A2A message or an MCP call's
 * `_meta` included (test/integration/a2a.test.ts and mcp.test.ts pay that way).
 */
export const MAX_JSON_DEPTH = 64;

/** body-parser's error type for a body nested too deeply (api/web/middleware/errorHandler.ts). */
export const TOO_DEEP = "entity.too.deep";

/**
 * `express.json`'s `verify`: refuses a body nested deeper than MAX_JSON_DEPTH before it is
 * parsed. JSON.parse copes with any depth, but what walks the value afterwards recurses: the
 * MCP route re-serializes the body for the SDK, and JSON.stringify overflowed the stack on a
 * few thousand levels of `[[[…]]]`, well within 16 kB (a 500 for anyone who sends it). One
 * pass over the bytes, skipping strings (brackets are ASCII: UTF-8 never has them inside a
 * multi-byte character).
 */
export function refuseDeepJson(
  _request: IncomingMessage,
  _response: ServerResponse,
  body: Buffer,
  encoding: string,
): void {
  // The scan reads bytes as UTF-8. body-parser decodes other charsets it knows after this
  // check (utf-7, utf-16, utf-32): in UTF-7 a bracket is written in base64, so a body could nest
  // as deep as it liked past the scan. JSON is UTF-8 (RFC 8259 §8.1): nothing else is taken.
  if (!/^utf-?8$/i.test(encoding)) {
    throw Object.assign(new Error(`unsupported charset "${encoding}"`), {
      status: 415,
      type: "charset.unsupported",
    });
  }
  let depth = 0;
  let inString = false;
  for (let index = 0; index < body.length; index += 1) {
    const byte = body[index];
    if (inString) {
      // A backslash escapes the next byte (a quote among them); a bare quote ends the string.
      if (byte === 0x5c) {
        index += 1;
      } else if (byte === 0x22) {
        inString = false;
      }
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x5b || byte === 0x7b) {
      depth += 1;
      if (depth > MAX_JSON_DEPTH) {
        throw Object.assign(new Error(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`), {
          status: 400,
          type: TOO_DEEP,
        });
      }
    } else if (byte === 0x5d || byte === 0x7d) {
      depth -= 1;
    }
  }
}
