import { AsyncLocalStorage } from "node:async_hooks";
import pino from "pino";
import { stdoutLines } from "./logLines.ts";
import { redactForLog } from "./redaction.ts";

export type Logger = pino.Logger;

/**
 * Fields every log line written while handling one request carries (its `request_id`),
 * whichever logger writes it: the HTTP layer runs each request inside `logContext.run`.
 */
export const logContext = new AsyncLocalStorage<Record<string, unknown>>();

/**
 * `destination`: stdout unless given (tests read the lines from a stream of their own), written
 * once per turn of the event loop (api/logLines.ts).
 * Every line passes through `redactForLog` (api/redaction.ts): URLs lose their credentials, path
 * and query (an RPC key sits there, and viem puts the URL into its errors' messages), and values
 * under secret-looking keys are replaced, at any depth, errors and their causes included.
 */
export function createLogger(
  level: string,
  name = "pay-and-earn",
  destination?: pino.DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    mixin: () => logContext.getStore() ?? {},
    // pino's own strategy assigns the line's fields into the mixin's object, here the request's
    // context: every later line of the same request would carry them too.
    mixinMergeStrategy: (line, context) => Object.assign({}, context, line),
    formatters: {
      // Runs before the serializers, on the object as logged: errors are still errors here.
      log: (object) => redactForLog(object) as Record<string, unknown>,
    },
    serializers: {
      // Already serialised and redacted by the formatter; an error logged by itself (pino puts
      // it under `err`) arrives here as is.
      err: (value: unknown) => redactForLog(value),
      // The message, including one pino takes from an error's own message.
      msg: (value: unknown) => redactForLog(value),
    },
  };
  return pino(options, destination ?? stdoutLines());
}
