import { AsyncLocalStorage } from "node:async_hooks";
import pino from "pino";
import { redactForLog } from "./redaction.ts";

export type Logger = pino.Logger;

/**
 * Fields every log line written while handling one request carries (its `request_id`),
 * whichever logger writes it: the HTTP layer runs each request inside `logContext.run`.
 */
export const logContext = new AsyncLocalStorage<Record<string, unknown>>();

/**
 * Stdout, written asynchronously: lines are gathered into writes of at least 4 KiB (under load,
 * one write per ~25 request lines instead of one synchronous write per line), and what is
 * gathered is written at least every second on a quiet service, and synchronously when the
 * process exits (pino registers that flush on `exit`: `process.exit`, the end of the event loop,
 * an uncaught exception). A SIGKILL loses what was gathered and not yet written (≤ 1 s).
 */
export function stdoutDestination(): pino.DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 1000 });
}

/**
 * `destination`: stdout unless given (tests read the lines from a stream of their own).
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
  // A silent logger writes nothing: no buffer, timer or exit hook for it (tests make many).
  const silent = level === "silent";
  return pino(options, destination ?? (silent ? pino.destination(1) : stdoutDestination()));
}
