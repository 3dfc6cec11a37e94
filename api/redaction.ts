/**
 * What must never reach a log line or a terminal: the credentials, path and query of a URL (an
 * RPC provider's key usually sits in its path, `…/v2/<key>`, or its query), and values under
 * keys that name a secret. Used by the logger for every line and by `npm start` for every line
 * it prints.
 */

/** A URL anywhere in a text: a scheme, `://`, and everything up to a space or a quote. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]{1,20}:\/\/[^\s"'<>`\\]+/gi;

/** Keys whose values are secrets, at any depth of a logged object. */
const SECRET_KEY =
  /(private_?key|secret|password|passwd|authorization|api_?key|bearer|access_?token|auth_?token|metrics_?token|^token$|raw_?tx|raw_?transaction)/i;

const REDACTED = "[redacted]";

/**
 * `scheme://host[:port]`, and `/…` when there was a path or query: enough to tell which
 * provider, nothing of its key. `https://user:pw@rpc.example/v2/KEY?x=1` → `https://rpc.example/…`.
 */
export function redactUrl(url: string): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(?:[^@/?#]*@)?([^/?#]*)(.*)$/i.exec(url);
  if (!match) return url;
  const [, scheme, host, rest] = match;
  const hasMore = rest !== undefined && rest !== "" && rest !== "/";
  return `${scheme}${host}${hasMore ? "/…" : ""}`;
}

/** Every URL in `text`, redacted. A text without `://` holds none (most log strings). */
export function redactUrlsIn(text: string): string {
  if (!text.includes("://")) return text;
  return text.replace(URL_IN_TEXT, (url) => redactUrl(url));
}

/**
 * `SECRET_KEY.test(key)`, remembered per key: log lines repeat the same few keys (every request
 * line has the same six), and the pattern's alternatives are tried on each. Keys come from
 * logged objects, some of them clients' data: the memory holds at most KNOWN_KEYS_MAX.
 */
const knownKeys = new Map<string, boolean>();
const KNOWN_KEYS_MAX = 1024;

function isSecretKey(key: string): boolean {
  let secret = knownKeys.get(key);
  if (secret === undefined) {
    secret = SECRET_KEY.test(key);
    if (knownKeys.size < KNOWN_KEYS_MAX) knownKeys.set(key, secret);
  }
  return secret;
}

/**
 * A copy of `value` fit for a log line: errors serialised (type, message, stack, their own
 * fields and causes), URLs in every string redacted, values under secret-looking keys replaced,
 * at any depth (pino's own `redact` reaches only the paths it is given). Cycles and depth are
 * bounded.
 */
export function redactForLog(value: unknown): unknown {
  return redactValue(value, 0);
}

/** `seen` is made with the first object: none for a primitive (a line's message). */
function redactValue(value: unknown, depth: number, seen?: WeakSet<object>): unknown {
  if (typeof value === "string") return redactUrlsIn(value);
  if (typeof value === "bigint") return value.toString();
  if (value === null || typeof value !== "object") return value;
  return redactObject(value, depth, seen ?? new WeakSet<object>());
}

function redactObject(value: object, depth: number, seen: WeakSet<object>): unknown {
  if (seen.has(value)) return "[circular]";
  if (depth > 8) return "[too deep]";
  seen.add(value);
  try {
    if (value instanceof Error) return redactObject(serializeError(value), depth + 1, seen);
    if (value instanceof Date) return value;
    if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
    if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1, seen));
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      copy[key] =
        isSecretKey(key) && item !== null && item !== undefined && item !== ""
          ? REDACTED
          : redactValue(item, depth + 1, seen);
    }
    return copy;
  } finally {
    seen.delete(value);
  }
}

/** An error as a plain object: what pino's err serializer gives, causes included. */
function serializeError(error: Error): Record<string, unknown> {
  const plain: Record<string, unknown> = {
    type: error.constructor?.name ?? "Error",
    message: error.message,
    stack: error.stack,
  };
  for (const [key, item] of Object.entries(error)) {
    if (!(key in plain)) plain[key] = item;
  }
  if (error.cause !== undefined) plain.cause = error.cause;
  return plain;
}
