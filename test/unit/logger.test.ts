import { Writable } from "node:stream";
import { expect, it } from "vitest";
import { createLogger, logContext } from "../../api/logger.ts";

it("gives each line of a request its request id and only its own fields", () => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  const logger = createLogger("info", "test", sink);
  const context = { request_id: "req-1" };
  logContext.run(context, () => {
    logger.info({ claim_id: "clm_1" }, "first");
    logger.info({ request_id: "own" }, "second");
    logger.info("third");
  });
  expect(lines.map(({ msg, request_id, claim_id }) => ({ msg, request_id, claim_id }))).toEqual([
    { msg: "first", request_id: "req-1", claim_id: "clm_1" },
    { msg: "second", request_id: "own", claim_id: undefined },
    { msg: "third", request_id: "req-1", claim_id: undefined },
  ]);
  expect(context).toEqual({ request_id: "req-1" });
});
