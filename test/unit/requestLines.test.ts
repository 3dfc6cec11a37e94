import { Writable } from "node:stream";
import { expect, it } from "vitest";
import { createLogger, logContext } from "../../api/logger.ts";
import {
  type RequestLine,
  type RequestLineLevel,
  requestLineWriter,
} from "../../api/requestLines.ts";

/** A logger whose lines are kept, as written, with their `time` taken out. */
function keptLogger(level: string) {
  const written: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      written.push(String(chunk).replace(/"time":\d+/, '"time":0'));
      done();
    },
  });
  return { logger: createLogger(level, "pay-and-earn", sink), written };
}

const lines: RequestLine[] = [
  {
    request_id: "5b0c7c1e-2d0f-4e4a-9d8e-0a1b2c3d4e5f",
    method: "GET",
    route: "/api/claims/:claimId",
    path: "/api/claims/clm_abc",
    status: 200,
    duration_ms: 1.234,
  },
  {
    request_id: "lb.42:7",
    method: "POST",
    route: "(unmatched)",
    // What a client may put in a path: quotes, backslashes, control characters, other scripts,
    // a lone surrogate, and a URL with credentials that must not reach the log.
    path: '/x"y\\z\u0001\u2028é漢\ud800/https://user:pw@rpc.example/v2/KEY?x=1',
    status: 404,
    duration_ms: 0.05,
  },
  {
    request_id: "r",
    method: "GET",
    route: "/GRAPHQL",
    path: "/GRAPHQL",
    status: 503,
    duration_ms: 12,
    aborted: true,
  },
];

it("writes each request line exactly as pino writes the same line", () => {
  for (const line of lines) {
    for (const level of ["debug", "info", "warn"] as RequestLineLevel[]) {
      const ours = keptLogger("debug");
      const pinos = keptLogger("debug");
      requestLineWriter(ours.logger)(level, line);
      // As the HTTP layer runs: inside the request's context, whose id the line repeats.
      logContext.run({ request_id: line.request_id }, () => pinos.logger[level](line, "request"));
      ours.logger.flush();
      pinos.logger.flush();
      expect(ours.written).toHaveLength(1);
      expect(ours.written).toEqual(pinos.written);
    }
  }
  const redacted = keptLogger("info");
  requestLineWriter(redacted.logger)("info", lines[1] as RequestLine);
  redacted.logger.flush();
  expect(redacted.written[0]).not.toContain("KEY");
  expect(redacted.written[0]).not.toContain("pw@");
});

it("writes nothing below the logger's level, and follows a level changed later", () => {
  const { logger, written } = keptLogger("info");
  const write = requestLineWriter(logger);
  write("debug", lines[0] as RequestLine);
  logger.flush();
  expect(written).toEqual([]);
  logger.level = "debug";
  write("debug", lines[0] as RequestLine);
  logger.level = "warn";
  write("info", lines[0] as RequestLine);
  logger.flush();
  expect(written).toHaveLength(1);
  expect(JSON.parse(written[0] as string)).toMatchObject({ level: 20, msg: "request" });
});
