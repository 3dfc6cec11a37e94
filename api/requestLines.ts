import pino from "pino";
import type { Logger } from "./logger.ts";
import { redactUrlsIn } from "./redaction.ts";

/** What the HTTP layer logs of every request, once it is answered (observeRequests.ts). */
export interface RequestLine {
  request_id: string;
  method: string;
  route: string;
  path: string;
  status: number;
  duration_ms: number;
  aborted?: true;
}

export type RequestLineLevel = "debug" | "info" | "warn";

/**
 * Writes request lines into `logger`'s stream, byte for byte the line `logger[level](line,
 * "request")` writes (test/unit/requestLines.test.ts holds the two together), without pino's
 * general path: its mixin, the redaction walk over every field and its serialisation loop cost ~7
 * µs a line on these machines, this ~0.5 µs, and every request pays it
 * (BENCHMARKS.md#http-routes). The fields are known: the id is checked or made by the service,
 * the method and status come from Node's parser; the path (and the route, whose mount part is spelt
 * as the client spelt it) get the redaction every logged string gets: URLs in them lose their
 * credentials, path and query.
 */
export function requestLineWriter(
  logger: Logger,
): (level: RequestLineLevel, line: RequestLine) => void {
  const internals = logger as unknown as Record<symbol, unknown>;
  const bindings = internals[pino.symbols.chindingsSym] as string;
  const stream = internals[pino.symbols.streamSym] as pino.DestinationStream;
  const levelValues = logger.levels.values;
  return (level, line) => {
    if (!logger.isLevelEnabled(level)) return;
    stream.write(
      `{"level":${levelValues[level]},"time":${Date.now()}${bindings},"request_id":${JSON.stringify(line.request_id)},"method":${JSON.stringify(line.method)},"route":${JSON.stringify(redactUrlsIn(line.route))},"path":${JSON.stringify(redactUrlsIn(line.path))},"status":${line.status},"duration_ms":${line.duration_ms}${line.aborted ? ',"aborted":true' : ""},"msg":"request"}\n`,
    );
  };
}
