import pino from "pino";

export type Logger = pino.Logger;

export function createLogger(level: string, name = "pay-and-earn"): Logger {
  return pino({
    name,
    level,
    // Keys and raw transactions must never reach a log line, whatever object is logged.
    redact: {
      paths: ["privateKey", "*.privateKey", "*.rawTransaction", "*.rawTx", "*.raw_tx"],
      censor: "[redacted]",
    },
  });
}
