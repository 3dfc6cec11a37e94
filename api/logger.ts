import { AsyncLocalStorage } from "node:async_hooks";
import pino from "pino";

export type Logger = pino.Logger;

/**
 * Fields every log line written while handling one request carries (its `request_id`),
 * whichever logger writes it: the HTTP layer runs each request inside `logContext.run`.
 */
export const logContext = new AsyncLocalStorage<Record<string, unknown>>();

/** `destination`: stdout unless given (tests read the lines from a stream of their own). */
export function createLogger(
  level: string,
  name = "pay-and-earn",
  destination?: pino.DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    mixin: () => logContext.getStore() ?? {},
    // Keys and raw transactions must never reach a log line, whatever object is logged.
    redact: {
      paths: [
        "privateKey",
        "*.privateKey",
        "*.rawTransaction",
        "*.rawTx",
        "*.raw_tx",
        "authorization",
        "*.authorization",
      ],
      censor: "[redacted]",
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
