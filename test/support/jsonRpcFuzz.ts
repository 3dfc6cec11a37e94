import fc from "fast-check";
import { expect } from "vitest";
import type { Database } from "../../api/db/connect.ts";

/**
 * What the fuzz of the agent surfaces (MCP at /mcp, A2A at /a2a) shares: hostile values, the
 * JSON-RPC envelopes around them, and the checks every answer must pass. A fixed seed, so a
 * failure replays as it was; `FUZZ_SEED=<n>` explores another.
 */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 32_032);

/** An answer slower than this is a hang (the service answers these in milliseconds). */
const ANSWER_MS = 10_000;

/** At most 16 kB of JSON is read (api/web/app.ts); a bigger body must be refused, not read. */
const BODY_LIMIT = 16 * 1024;

const hexDigits = (length: number) =>
  fc.string({
    unit: fc.constantFrom(..."0123456789abcdefABCDEF"),
    minLength: length,
    maxLength: length,
  });

/**
 * Things that look like a payout address and are not one: never 40 hex digits, which could be a
 * valid address (every all-digit or all-lowercase one is), so that no fuzzed call can create a
 * claim or a task legitimately and "nothing stored" holds.
 */
export const notAnAddress = fc.oneof(
  hexDigits(39).map((digits) => `0x${digits}`),
  hexDigits(41).map((digits) => `0x${digits}`),
  hexDigits(38).map((digits) => `0x${digits}zz`),
  fc.constantFrom("0x", "0X", "0x0", "vitalik.eth", "0x\u0000", " 0x "),
);

/** Strings an attacker tries: control characters, injections, prototype keys, direction marks. */
const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom(
    "",
    "\u0000",
    "__proto__",
    "constructor",
    "prototype",
    "'; drop table app.claims; --",
    "{{7*7}}<%= 7*7 %>",
    "../../../../etc/passwd",
    "%s%n%x",
    "\u202egnp.exe",
    "\uD800",
    "\r\nX-Injected: 1",
    "clm_AAAAAAAAAAAAAAAAAAAAAA",
  ),
);

/** A string long enough to matter and still under the body limit (the field's own limit applies). */
const hugeString = fc.integer({ min: 2_000, max: 12_000 }).map((length) => "A".repeat(length));

/** Nested arrays, as deep as JSON.stringify still writes them in the test's own process. */
const deepNesting = fc
  .integer({ min: 50, max: 1_000 })
  .map((depth) => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`) as unknown);

/**
 * Nesting deeper than any recursive walker (JSON.stringify, a schema check) survives, under the
 * body limit: written as text, since the test's own JSON.stringify would overflow on it.
 */
function deeplyNested(methods: readonly string[]): fc.Arbitrary<string> {
  return fc
    .record({
      method: fc.constantFrom(...methods),
      depth: fc.integer({ min: 2_000, max: 7_900 }),
      where: fc.constantFrom("params", "arguments", "id"),
    })
    .map(({ method, depth, where }) => {
      const deep = `${"[".repeat(depth)}${"]".repeat(depth)}`;
      if (where === "id") return `{"jsonrpc":"2.0","id":${deep},"method":"${method}","params":{}}`;
      if (where === "params")
        return `{"jsonrpc":"2.0","id":1,"method":"${method}","params":${deep}}`;
      return `{"jsonrpc":"2.0","id":1,"method":"${method}","params":{"name":"get_claim","arguments":{"claim_id":${deep}},"message":{"parts":[{"data":${deep}}]}}}`;
    });
}

/** Any value of any JSON type, hostile ones weighted in. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 4 },
  { arbitrary: hostileString, weight: 3 },
  { arbitrary: notAnAddress, weight: 2 },
  { arbitrary: hugeString, weight: 1 },
  { arbitrary: deepNesting, weight: 1 },
  {
    arbitrary: fc.constantFrom(
      Number.MAX_SAFE_INTEGER + 2,
      -1,
      1e308,
      -0,
      0.5,
      true,
      null,
      [],
      {},
      { __proto__: { polluted: true } },
    ),
    weight: 1,
  },
);

/** An object whose keys are the given fields (any of them, any values) and a few unknown ones. */
export function hostileArguments(fields: readonly string[]): fc.Arbitrary<unknown> {
  const known = Object.fromEntries(fields.map((field) => [field, hostileValue]));
  return fc.oneof(
    { arbitrary: fc.record(known, { requiredKeys: [] }), weight: 4 },
    { arbitrary: fc.dictionary(hostileString, hostileValue, { maxKeys: 5 }), weight: 1 },
    { arbitrary: hostileValue, weight: 1 },
  );
}

/** JSON-RPC ids, valid and not. */
const anyId = fc.oneof(
  fc.integer(),
  fc.string({ maxLength: 20 }),
  fc.constantFrom(null, 1.5, true, [], {}, "x".repeat(5_000)),
);

/** A JSON-RPC request around `method` and `params`, its envelope sometimes broken. */
export function jsonRpcRequest(
  method: fc.Arbitrary<unknown>,
  params: fc.Arbitrary<unknown>,
): fc.Arbitrary<unknown> {
  return fc.oneof(
    {
      arbitrary: fc.record({ jsonrpc: fc.constant("2.0"), id: fc.integer(), method, params }),
      weight: 6,
    },
    {
      arbitrary: fc.record(
        {
          jsonrpc: fc.oneof(fc.constantFrom("2.0", "1.0", "3.0", ""), hostileValue),
          id: anyId,
          method: fc.oneof(method, hostileValue),
          params: fc.oneof(params, hostileValue),
        },
        { requiredKeys: [] },
      ),
      weight: 2,
    },
  );
}

/**
 * The body of one POST: a request, a batch of them (JSON-RPC 2.0 batches; an empty one too),
 * or bytes that are not JSON-RPC at all: broken JSON, a bare value, a body over the limit.
 */
export function jsonRpcBody(
  request: fc.Arbitrary<unknown>,
  methods: readonly string[],
): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: deeplyNested(methods), weight: 1 },
    { arbitrary: request.map((one) => JSON.stringify(one)), weight: 8 },
    {
      arbitrary: fc
        .array(request, { minLength: 0, maxLength: 4 })
        .map((batch) => JSON.stringify(batch)),
      weight: 2,
    },
    {
      arbitrary: request
        .map((one) => JSON.stringify(one))
        .chain((text) =>
          fc
            .integer({ min: 1, max: Math.max(1, text.length - 1) })
            .map((cut) => text.slice(0, cut)),
        ),
      weight: 1,
    },
    {
      arbitrary: fc.oneof(
        fc.jsonValue().map((value) => JSON.stringify(value) ?? "null"),
        fc.string({ maxLength: 100 }),
        fc.constantFrom("", "\uFEFF{}", "{\u0000}", "[", "]", "null", "NaN", '{"jsonrpc":"2.0",}'),
        fc
          .integer({ min: BODY_LIMIT + 1, max: BODY_LIMIT + 4_000 })
          .map(
            (length) =>
              `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"${"A".repeat(length)}"}}`,
          ),
      ),
      weight: 1,
    },
  );
}

/** One answer, as the wire had it, and the JSON-RPC messages in it (a JSON body or SSE events). */
export interface RpcReply {
  status: number;
  contentType: string;
  text: string;
  messages: Record<string, unknown>[];
}

/**
 * POSTs `body` and reads the whole answer; a hang fails (the fetch is aborted). An SSE answer's
 * `data:` events are its messages.
 */
export async function postJsonRpc(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<RpcReply> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
    signal: AbortSignal.timeout(ANSWER_MS),
  });
  const text = await response.text();
  const contentType = response.headers.get("content-type") ?? "";
  const values: unknown[] = contentType.includes("text/event-stream")
    ? text
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trim())
        .filter((data) => data !== "")
        .map((data) => JSON.parse(data))
    : text === ""
      ? []
      : [JSON.parse(text)];
  const messages = values.flatMap((value) => (Array.isArray(value) ? value : [value]));
  return { status: response.status, contentType, text, messages: messages as RpcReply["messages"] };
}

/**
 * The checks every fuzzed answer passes: no 5xx; JSON (or SSE of JSON) whatever was sent;
 * every message a JSON-RPC 2.0 answer, an error with an integer code and a message or a result;
 * nothing of the service's insides (a stack frame, a source path, a database error).
 */
export function expectJsonRpcAnswer(reply: RpcReply): void {
  expect(reply.status, reply.text.slice(0, 300)).toBeLessThan(500);
  // 202: a notification (no id) has no answer. Everything else answers in JSON-RPC.
  if (reply.status !== 202) {
    expect(reply.contentType).toMatch(/^(application\/json|text\/event-stream)/);
    expect(reply.messages.length, reply.text.slice(0, 300)).toBeGreaterThan(0);
  }
  for (const message of reply.messages) {
    expect(message).toHaveProperty("jsonrpc", "2.0");
    if ("error" in message) {
      const error = message.error as { code: unknown; message: unknown };
      expect(Number.isInteger(error.code), JSON.stringify(error)).toBe(true);
      expect(typeof error.message).toBe("string");
    } else {
      expect(message).toHaveProperty("result");
    }
  }
  expectNoInternals(reply.text);
}

/** No stack frame, source path or database error in what a stranger is told. */
export function expectNoInternals(text: string): void {
  // A stack frame: "at fn (/path/file.js:1:2)", "at /path/file.ts:1:2", "at file:///…:1:2".
  expect(text).not.toMatch(/\bat (?:async )?(?:[^\s"()]+ \()?(?:file:\/\/)?\/[^\s"():]+:\d+:\d+/);
  expect(text).not.toMatch(/node_modules|\.[cm]?[jt]s:\d+:\d+/);
  expect(text).not.toMatch(/SQLSTATE|syntax error at or near|postgres(?:ql)?:\/\//i);
}

/** How many rows the tables a refused call must not touch hold (claims, tasks, x402 records). */
export async function storedRows(sql: Database) {
  const [row] = await sql<{ claims: number; tasks: number; x402: number }[]>`
    select (select count(*)::int from app.claims) as claims,
           (select count(*)::int from app.a2a_tasks) as tasks,
           (select count(*)::int from app.x402_payments) as x402`;
  return row;
}
